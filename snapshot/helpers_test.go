package snapshot

import (
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/logindex"
)

// testLog is a real evidence log in a temporary state directory whose
// records carry times from a test clock: one minute apart, from t0.
type testLog struct {
	t     *testing.T
	dir   string
	log   *evidence.Log
	clock time.Time
	ids   []string
	keep  *logindex.Keeper
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newTestLog(t *testing.T) *testLog {
	t.Helper()
	dir := t.TempDir()
	if err := evidence.Init(dir, "aerfs.test/snapshot"); err != nil {
		t.Fatal(err)
	}
	l, err := evidence.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &testLog{t: t, dir: dir, log: l, clock: t0}
}

// blob stores s and returns its hash.
func (tl *testLog) blob(s string) string {
	tl.t.Helper()
	h, err := tl.log.PutBlob([]byte(s))
	if err != nil {
		tl.t.Fatal(err)
	}
	return h
}

// at is the time of the i-th record appended (0-based).
func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }

func (tl *testLog) add(r *evidence.Record) string {
	tl.t.Helper()
	r.Meta.Time = evidence.FormatTime(at(len(tl.ids)))
	if r.Principal == "" {
		r.Principal = "USER"
	}
	id, err := tl.log.Append(r)
	if err != nil {
		tl.t.Fatal(err)
	}
	tl.ids = append(tl.ids, id)
	// Every third record, the log's index is written as the daemon
	// writes it: the tests then read segments and a tail, not only a
	// fold of the whole log.
	if len(tl.ids)%3 == 0 {
		if err := tl.log.Flush(); err != nil {
			tl.t.Fatal(err)
		}
		if tl.keep == nil {
			if tl.keep, err = logindex.OpenKeeper(tl.dir, tl.log); err != nil {
				tl.t.Fatal(err)
			}
			tl.t.Cleanup(func() { tl.keep.Close() })
		} else if err := tl.keep.CatchUp(); err != nil {
			tl.t.Fatal(err)
		}
		if err := tl.keep.Checkpoint(); err != nil {
			tl.t.Fatal(err)
		}
	}
	return id
}

func (tl *testLog) write(path, principal, session, old, nw string, parents ...string) string {
	return tl.add(&evidence.Record{Type: evidence.TypeWrite, Principal: principal, Parents: parents,
		Meta:    evidence.Meta{Path: path, Session: session, Verdict: "allow"},
		Payload: &evidence.Payload{OldHash: old, NewHash: nw}})
}

// index loads the index as readers do: after a flush, so that the
// checkpoint covers every record appended so far.
func (tl *testLog) index() *Index {
	tl.t.Helper()
	if err := tl.log.Flush(); err != nil {
		tl.t.Fatal(err)
	}
	x, err := Load(tl.dir)
	if err != nil {
		tl.t.Fatal(err)
	}
	if len(tl.ids) >= 3 && x.Rebuilt() != "" {
		tl.t.Fatalf("the log's index was not used: %s", x.Rebuilt())
	}
	tl.t.Cleanup(func() { x.Close() })
	return x
}

func eqState(t *testing.T, what string, got, want State) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %s = %.8q, want %.8q (got %v)", what, k, got[k], v, got)
		}
	}
}
