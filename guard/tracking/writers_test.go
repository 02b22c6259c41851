package tracking

import (
	"os/exec"
	"testing"
	"time"

	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/principal"
)

// A writer on its way out is not an unidentified writer: a zombie (and a
// process with PF_EXITING) counts as exited, and its last resolutions
// decide what it wrote.
func TestExitingWriterCountsAsExited(t *testing.T) {
	if exiting(1) {
		t.Fatal("init is not exiting")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for !exiting(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("an exited, unreaped child is not seen as exiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, c := range []struct {
		stat string
		want bool
	}{
		{"12 (sh) S 1 12 12 0 -1 4194304 90 0 0 0", false},
		{"12 (a) b) Z 1 12 12 0 -1 4194304 90 0 0 0", true},
		{"12 (sh) R 1 12 12 0 -1 4194308 90 0 0 0", true}, // PF_EXITING
		{"12 (sh) X 1 12 12 0 -1 0 0 0 0 0", true},
		{"garbage", false},
	} {
		if got := exitingStat([]byte(c.stat)); got != c.want {
			t.Errorf("exitingStat(%q) = %v, want %v", c.stat, got, c.want)
		}
	}
}

// Enrol counts a process among the writers of every followed handle of
// the file (those whose label follows their writers), and only of that
// file.
func TestEnrolReachesEveryFollowedHandleOfTheFile(t *testing.T) {
	var o Opens
	k, other := label.Key{Dev: 1, Ino: 2}, label.Key{Dev: 1, Ino: 3}
	var got []*principal.Resolved
	enrol := func(res *principal.Resolved) { got = append(got, res) }
	o.WriteOpened(k, 10, func() {}, enrol)
	o.WriteOpened(k, 11, func() {}, enrol)
	o.WriteOpened(k, 0, nil, nil) // a guarded draft: its writes reach aerfs
	o.WriteOpened(other, 12, func() {}, enrol)
	res := &principal.Resolved{Reason: "the session that inherited the descriptor"}
	if n := o.Enrol(k, res); n != 2 || len(got) != 2 || got[0] != res || got[1] != res {
		t.Fatalf("Enrol: %d handles, enrolled %v; want the two followed handles of the file", n, got)
	}
	if n := o.Enrol(label.Key{Dev: 9, Ino: 9}, res); n != 0 {
		t.Fatalf("Enrol of a file nobody writes: %d", n)
	}
}
