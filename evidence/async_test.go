package evidence

import (
	"testing"
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
