package evidence

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Records queued without waiting are durable, in order, and visible to
// readers after Flush.
func TestAppendAsyncAndFlush(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir, "test.aerfs/async"); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var ids []string
	for i := 0; i < 100; i++ {
		r := sampleRecord(i)
		if len(ids) > 0 {
			r.Parents = []string{ids[len(ids)-1]} // parents queued just before
		}
		id, err := l.AppendAsync(r, func(err error) { t.Errorf("async append: %v", err) })
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := ReadAll(dir, func(_ int64, id string, _ *Record) error {
		got = append(got, id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("read %d records after Flush, queued %d", len(got), len(ids))
	}
	for i := range ids {
		if got[i] != ids[i] {
			t.Fatalf("record %d: %s, queued %s", i, got[i], ids[i])
		}
	}
	if _, err := VerifyState(dir, ""); err != nil {
		t.Fatal(err)
	}
}

// A batch of queued records waits for company: the synchronous append that
// follows shares its flush of the log. Without a waiting request the
// queued record is still written once the wait is over.
func TestQueuedRecordsShareTheNextFlush(t *testing.T) {
	oldLinger, oldSync := queuedLinger, fdatasync
	t.Cleanup(func() { queuedLinger, fdatasync = oldLinger, oldSync })
	var mu sync.Mutex
	logSyncs := 0 // flushes of the journal: a batch's one flush
	fdatasync = func(f *os.File) error {
		if filepath.Base(f.Name()) == journalName {
			mu.Lock()
			logSyncs++
			mu.Unlock()
		}
		return f.Sync()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return logSyncs }

	// The wait is set before each log opens: its committer reads it.
	queuedLinger = time.Second // long: the join below does not depend on timing
	l := openLog(t, newState(t))
	if _, err := l.AppendAsync(sampleRecord(1), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the committer holds the queued record
	if n := count(); n != 0 {
		t.Fatalf("a queued record was flushed alone (%d flushes) while its batch could wait", n)
	}
	if _, err := l.Append(sampleRecord(2)); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("a queued and a synchronous record took %d flushes of the log, want 1", n)
	}
	if l.Size() != 2 {
		t.Fatalf("size %d, want 2", l.Size())
	}
	l.Close()

	queuedLinger = 20 * time.Millisecond
	d := newState(t)
	l = openLog(t, d)
	defer l.Close()
	before := count()
	if _, err := l.AppendAsync(sampleRecord(3), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if count() != before+1 || l.Size() != 1 {
		t.Fatalf("a queued record alone was not written after the wait (%d flushes, size %d)", count()-before, l.Size())
	}
}
