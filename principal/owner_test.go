package principal

import (
	"testing"
	"time"

	"github.com/aerfs/aerfs/policy"
)

func TestReleaseLiftsTheTreesQuarantine(t *testing.T) {
	root := &Session{ID: "root"}
	child := &Session{ID: "child", parent: root}
	if !root.Quarantine() || !child.Quarantined() {
		t.Fatal("the root's quarantine does not cover its child")
	}
	got := child.Release()
	if len(got) != 1 || got[0] != "root" || child.Quarantined() || root.Quarantined() {
		t.Fatalf("release from the child: %v, child %v, root %v", got, child.Quarantined(), root.Quarantined())
	}
	if got := child.Release(); len(got) != 0 {
		t.Fatalf("a second release released %v", got)
	}
	root.AddTaint(1)
	child.Release()
	if child.Taint() == 0 {
		t.Fatal("a release washed the taint")
	}
}

func TestSessionConfinementAndEnd(t *testing.T) {
	s := &Session{ID: "s"}
	if s.Confinement() != "" || !s.Ended().IsZero() {
		t.Fatal("a new session has a confinement or an end")
	}
	s.SetConfinement("landlock")
	s.SetConfinement("")
	now := time.Now()
	s.MarkEnded(now)
	if s.Confinement() != "landlock" || s.Ended().UnixNano() != now.UnixNano() {
		t.Fatalf("confinement %q ended %v", s.Confinement(), s.Ended())
	}
}

// A nested session's taint reaches the sessions it was started from (they
// share its pipes and proxy), never a sibling; the outer session's taint
// still reaches the nested one.
func TestNestedTaintReachesAncestors(t *testing.T) {
	root := &Session{ID: "root"}
	mid := &Session{ID: "mid", parent: root}
	leaf := &Session{ID: "leaf", parent: mid}
	sib := &Session{ID: "sib", parent: root}
	if !leaf.AddTaint(policy.SecretRisk) {
		t.Fatal("AddTaint did not report growth")
	}
	for _, s := range []*Session{root, mid, leaf} {
		if s.Taint()&policy.SecretRisk == 0 {
			t.Errorf("session %s: taint %v, want SECRET_RISK from the nested session", s.ID, s.Taint())
		}
	}
	// sib inherits from root, which now holds it: a sibling started from
	// the same session reads through the same pipes.
	if leaf.AddTaint(policy.SecretRisk) {
		t.Error("AddTaint reported growth for taint already held")
	}
	root.AddTaint(policy.WebDerived)
	if leaf.Taint()&policy.WebDerived == 0 || sib.Taint()&policy.WebDerived == 0 {
		t.Error("the outer session's taint does not reach the nested ones")
	}
}
