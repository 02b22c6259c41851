package evidence

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smallIDWindow makes the id table write a run every few records.
func smallIDWindow(t *testing.T, n int64) {
	old := idWindow
	idWindow = n
	t.Cleanup(func() { idWindow = old })
}

// appendChain appends n records, each naming the previous one as its parent,
// and returns their ids in order.
func appendChain(t *testing.T, l *Log, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		r := chainRecord(i, ids)
		id, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// chainRecord is record i of appendChain (after the ids before it).
func chainRecord(i int, before []string) *Record {
	r := sampleRecord(i)
	r.Meta.Time = FormatTime(time.Date(2026, 3, 1, 12, 0, 0, i, time.UTC))
	if len(before) > 0 {
		r.Parents = []string{before[len(before)-1]}
	}
	return r
}

// waitRuns waits until the id table's background writer has written
// every run it has records for.
func waitRuns(l *Log) {
	for {
		n := l.Size()
		l.idt.maybeFlush(n)
		l.idt.mu.Lock()
		busy, r := l.idt.busy, l.idt.r
		l.idt.mu.Unlock()
		if !busy && n-r < 2*idWindow {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestIDTableRunsAnswerLikeTheIndex(t *testing.T) {
	smallIDWindow(t, 8)
	dir := newState(t)
	l := openLog(t, dir)
	ids := appendChain(t, l, 150)
	waitRuns(l)
	l.idt.mu.Lock()
	runs, r := len(l.idt.runs), l.idt.r
	l.idt.mu.Unlock()
	if runs == 0 || r < 100 || runs > 8 {
		t.Fatalf("%d runs covering %d records: the table neither wrote nor merged runs", runs, r)
	}
	// An old record, now only in a run, is still a duplicate; an old
	// parent is still found.
	dup := chainRecord(3, ids[:3])
	if _, err := l.Append(dup); err == nil || !strings.Contains(err.Error(), "already in the log") {
		t.Fatalf("a duplicate of a record held in a run was appended: %v", err)
	}
	child := sampleRecord(1000)
	child.Parents = []string{ids[0]}
	if _, err := l.Append(child); err != nil {
		t.Fatalf("a parent held in a run was not found: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	onDisk, _ := filepath.Glob(filepath.Join(dir, "evidence", "ids", "0*"))
	for i, id := range ids {
		got, err := LookupID(dir, id[:10])
		if err != nil || len(got) != 1 || got[0] != int64(i) {
			t.Fatalf("LookupID(%s) = %v, %v; want [%d]", id[:10], got, err, i)
		}
	}
	// Reopened, the runs are read back (and checked) rather than rebuilt.
	l = openLog(t, dir)
	defer l.Close()
	if len(l.idt.runs) != len(onDisk) {
		t.Fatalf("reopened with %d runs, %d on disk", len(l.idt.runs), len(onDisk))
	}
	if _, err := l.Append(chainRecord(3, ids[:3])); err == nil {
		t.Fatal("a duplicate was appended after a reopen")
	}
}

func TestIDTableDamagedRunIsRebuiltFromTheIndex(t *testing.T) {
	smallIDWindow(t, 8)
	dir := newState(t)
	l := openLog(t, dir)
	ids := appendChain(t, l, 80)
	waitRuns(l)
	l.Close()
	runs, _ := filepath.Glob(filepath.Join(dir, "evidence", "ids", "0*"))
	if len(runs) == 0 {
		t.Fatal("no run written")
	}
	// One byte of the first run changed: it no longer hashes to its
	// trailer, and nothing of it may be believed.
	b, _ := os.ReadFile(runs[0])
	b[idHeader+3] ^= 0xff
	os.WriteFile(runs[0], b, 0o600)
	if got, err := LookupID(dir, ids[1]); err != nil || len(got) != 1 || got[0] != 1 {
		t.Fatalf("reader with a damaged run: LookupID = %v, %v", got, err)
	}
	l = openLog(t, dir)
	defer l.Close()
	// The damaged run is set aside and its records written again from the
	// index file.
	waitRuns(l)
	for _, r := range l.idt.runs {
		if _, err := readIDRun(filepath.Join(dir, "evidence", "ids", idRunName(r.from, r.to)), r.from, r.to, false); err != nil {
			t.Fatalf("a damaged run was kept: %v", err)
		}
	}
	if _, err := l.Append(chainRecord(1, ids[:1])); err == nil {
		t.Fatal("a duplicate was appended once the damaged run was dropped")
	}
}

func TestIDTableHealTruncates(t *testing.T) {
	smallIDWindow(t, 4)
	dir := newState(t)
	l := openLog(t, dir)
	defer l.Close()
	appendChain(t, l, 30)
	waitRuns(l)
	l.mu.Lock()
	err := l.idt.truncate(5)
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	l.idt.mu.Lock()
	defer l.idt.mu.Unlock()
	for id, pos := range l.idt.recent {
		if pos >= 5 {
			t.Fatalf("id %x at %d kept past the cut", id[:4], pos)
		}
	}
	if l.idt.r > 5 {
		t.Fatalf("runs cover %d records past a cut at 5", l.idt.r)
	}
}
