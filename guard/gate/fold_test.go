package gate

import (
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

func refusal(session string) *evidence.Record {
	return &evidence.Record{Type: evidence.TypeVerdict, Meta: evidence.Meta{Session: session, Op: "write", Path: "MEMORY.md", Rule: "R2-taint", Verdict: "deny", Reason: "tainted"}}
}

// Every refusal is accounted for: recorded one by one (the first few of a
// kind in a window) or in the count of a summary record, at the window's
// end, at a flush, or when the kinds are forgotten.
func TestFoldAccountsForEveryRefusal(t *testing.T) {
	var emitted []*evidence.Record
	f := &folder{emit: func(r *evidence.Record) { emitted = append(emitted, r) }}
	t0 := time.Now()
	total, recorded := 0, 0
	sum := func(rs []*evidence.Record) {
		for _, r := range rs {
			if r.Meta.Folded == 0 {
				t.Fatalf("a summary without a count: %+v", r.Meta)
			}
			recorded += r.Meta.Folded
		}
	}
	// admit makes n refusals of session's kind at time at (plus i ms),
	// counting what is recorded; it returns the summaries of the first.
	admit := func(session string, n int, at time.Time) (first []*evidence.Record) {
		for i := 0; i < n; i++ {
			ok, pre := f.admit(refusal(session), at.Add(time.Duration(i)*time.Millisecond))
			if i == 0 {
				first = pre
			}
			total++
			sum(pre)
			if ok {
				recorded++
			}
		}
		return first
	}
	admit("s", 50, t0)
	if recorded != foldFirst {
		t.Fatalf("%d recorded one by one in the window, want %d", recorded, foldFirst)
	}
	// The next window: the count of the last comes first.
	pre := admit("s", 11, t0.Add(foldWindow+time.Second))
	if len(pre) != 1 || pre[0].Meta.Folded != 50-foldFirst || pre[0].Meta.Verdict != "deny" {
		t.Fatalf("the window's end: %d summaries %+v", len(pre), pre)
	}
	// Another kind, then a flush.
	admit("other", 7, t0.Add(foldWindow+3*time.Second))
	f.flush()
	sum(emitted)
	if recorded != total {
		t.Fatalf("%d refusals accounted for, %d made", recorded, total)
	}
	emitted = nil
	f.flush()
	if len(emitted) != 0 {
		t.Fatalf("a second flush recorded %d counts again", len(emitted))
	}
}

// A window's count is recorded by its timer when no later refusal of the
// kind comes.
func TestFoldTimerRecordsTheCount(t *testing.T) {
	got := make(chan *evidence.Record, 1)
	f := &folder{emit: func(r *evidence.Record) { got <- r }}
	start := time.Now().Add(-foldWindow + 50*time.Millisecond) // the window ends in 50 ms
	for i := 0; i < foldFirst+4; i++ {
		f.admit(refusal("s"), start.Add(time.Duration(i)*time.Millisecond))
	}
	select {
	case r := <-got:
		if r.Meta.Folded != 4 {
			t.Fatalf("folded %d, want 4", r.Meta.Folded)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the window's count was never recorded")
	}
}
