package principal

import (
	"testing"
	"time"
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
