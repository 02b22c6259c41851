package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

func readsRecords(t *testing.T, m *Monitor) []*evidence.Record {
	var out []*evidence.Record
	for _, r := range records(t, m) {
		if r.Type == evidence.TypeReads {
			out = append(out, r)
		}
	}
	return out
}

func shaHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (m *Monitor) testRead(t *testing.T, res *principal.Resolved, rel string) {
	t.Helper()
	st, err := m.lstatRel(rel)
	if err != nil {
		t.Fatal(err)
	}
	m.readOpened(context.Background(), res, rel, st, nil, syscall.O_RDONLY)
}

// Every file a reader opens for reading is listed once, with the hash of
// the version read, in a reads record that its next change names; the
// next reads record names the previous one.
func TestReadsListedAtTheNextChange(t *testing.T) {
	m, ws, _ := testMonitor(t, map[string]string{"notes/src.md": "poison\n", "notes/b.md": "b\n", "MEMORY.md": "m\n"})
	me := m.Reg.Resolve(os.Getpid())
	if p := m.parentsFor(me, "MEMORY.md"); len(p) != 0 {
		t.Fatalf("parents before any read: %v", p)
	}
	m.testRead(t, me, "notes/src.md")
	m.testRead(t, me, "notes/src.md") // the same version again: listed once
	// Write-only opens are not reads.
	st, _ := m.lstatRel("notes/b.md")
	m.readOpened(context.Background(), me, "notes/b.md", st, nil, syscall.O_WRONLY)
	p1 := m.parentsFor(me, "MEMORY.md")
	rs := readsRecords(t, m)
	if len(rs) != 1 || len(p1) != 1 {
		t.Fatalf("reads records %d, parents %v", len(rs), p1)
	}
	r := rs[0].Payload.Reads
	if len(r) != 1 || r[0].Path != "notes/src.md" || r[0].Hash != shaHex("poison\n") || r[0].Fp != "" || len(rs[0].Parents) != 0 {
		t.Fatalf("reads record %+v", rs[0])
	}
	// Nothing new read: the same parent, no new record.
	if p := m.parentsFor(me, "AGENTS.md"); len(p) != 1 || p[0] != p1[0] || len(readsRecords(t, m)) != 1 {
		t.Fatalf("second change: parents %v", p)
	}
	// A file changed between the read and the change: listed by its
	// fingerprint only (the content read is gone). The new record names
	// the previous one.
	m.testRead(t, me, "notes/b.md")
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(filepath.Join(ws, "notes/b.md"), []byte("changed\n"), 0o644)
	p2 := m.parentsFor(me, "MEMORY.md")
	rs = readsRecords(t, m)
	if len(rs) != 2 || len(p2) != 1 || p2[0] == p1[0] || rs[1].Parents[0] != p1[0] {
		t.Fatalf("reads records %d, parents %v", len(rs), p2)
	}
	if r := rs[1].Payload.Reads; len(r) != 1 || r[0].Path != "notes/b.md" || r[0].Hash != "" || r[0].Fp == "" {
		t.Fatalf("changed file listed as %+v", r)
	}
	// The changed version, read again, is a new version: listed again.
	m.testRead(t, me, "notes/b.md")
	m.parentsFor(me, "MEMORY.md")
	rs = readsRecords(t, m)
	if r := rs[len(rs)-1].Payload.Reads; len(rs) != 3 || r[0].Hash != shaHex("changed\n") {
		t.Fatalf("new version of b: %+v", rs[len(rs)-1])
	}
	// An unidentified caller's reads are not kept.
	m.testRead(t, &principal.Resolved{Reason: "test"}, "notes/src.md")
	if _, ok := m.rt.sets[readerKey(&principal.Resolved{})]; ok {
		t.Fatal("unidentified reader tracked")
	}
}

// A reader that reads more than readsPendingMax files before changing
// anything has them listed in the background, in records under the size
// limit, chained.
func TestReadsSpillAndChain(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < readsPendingMax+10; i++ {
		files[fmt.Sprintf("d/f%05d", i)] = "x"
	}
	m, _, _ := testMonitor(t, files)
	me := m.Reg.Resolve(os.Getpid())
	for i := 0; i < readsPendingMax+10; i++ {
		m.testRead(t, me, fmt.Sprintf("d/f%05d", i))
	}
	p := m.parentsFor(me, "MEMORY.md")
	rs := readsRecords(t, m)
	total := 0
	for i, r := range rs {
		total += len(r.Payload.Reads)
		if i > 0 && (len(r.Parents) != 1 || r.Parents[0] == "") {
			t.Fatalf("record %d not chained: %v", i, r.Parents)
		}
	}
	if total != readsPendingMax+10 || len(rs) < 2 || len(p) != 1 {
		t.Fatalf("%d reads in %d records, parents %v", total, len(rs), p)
	}
}

func TestProcAlive(t *testing.T) {
	me := m0Resolve(t)
	if !procAlive(me.Proc.ID) {
		t.Fatal("this process is not alive")
	}
	if procAlive(principal.ProcID{Tgid: me.Proc.ID.Tgid, Start: me.Proc.ID.Start + 1}) {
		t.Fatal("a reused pid is the same process")
	}
}

func m0Resolve(t *testing.T) *principal.Resolved {
	m, _, _ := testMonitor(t, nil)
	return m.Reg.Resolve(os.Getpid())
}

// BenchmarkReadOpened is the cost a read adds to an open: a file already
// listed (the common case: the same files are read again and again), and
// a new one.
func BenchmarkReadOpened(b *testing.B) {
	ws, state := b.TempDir(), b.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644)
	m, res := benchMonitor(b, ws, state)
	var st syscall.Stat_t
	syscall.Lstat(filepath.Join(ws, "f"), &st)
	ctx := context.Background()
	b.Run("seen", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			m.readOpened(ctx, res, "f", &st, nil, syscall.O_RDONLY)
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			st.Mtim.Nsec = int64(i) // another version each time
			m.readOpened(ctx, res, "f", &st, nil, syscall.O_RDONLY)
		}
	})
}

func benchMonitor(b *testing.B, ws, state string) (*Monitor, *principal.Resolved) {
	if err := evidence.Init(state, "aerfs/test"); err != nil {
		b.Fatal(err)
	}
	log, err := evidence.Open(state)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { log.Close() })
	labels, err := OpenLabels(filepath.Join(state, "labels.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { labels.Close() })
	fd, err := syscall.Open(ws, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { syscall.Close(fd) })
	pol := policy.Default()
	reg := principal.NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	m, err := NewMonitor(Config{RootFd: fd, StateDir: state, Policy: pol, Registry: reg, Labels: labels, Recorder: log, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	return m, reg.Resolve(os.Getpid())
}

// A file too big to hash at a change is listed by its fingerprint.
func TestReadsBigFileByFingerprint(t *testing.T) {
	m, ws, _ := testMonitor(t, map[string]string{"small": "s"})
	if err := os.Truncate(filepath.Join(ws, "small"), readHashMax+1); err != nil {
		t.Fatal(err)
	}
	me := m.Reg.Resolve(os.Getpid())
	m.testRead(t, me, "small")
	m.parentsFor(me, "MEMORY.md")
	rs := readsRecords(t, m)
	if len(rs) != 1 || rs[0].Payload.Reads[0].Hash != "" || rs[0].Payload.Reads[0].Fp == "" {
		t.Fatalf("big file listed as %+v", rs)
	}
}
