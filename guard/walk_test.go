package guard

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aerfs/aerfs/guard/draft"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/internal/calltrace"
)

// inHouse is the scope of the walks: the FUSE nodes and the guard's rooms
// (the backing directory's *at calls, the policy, the authority and the
// evidence log are floors below them: calls to them are exits).
func inHouse(pkg string) bool {
	const mod = "github.com/aerfs/aerfs/"
	return pkg == mod+"fs" || pkg == mod+"guard" || strings.HasPrefix(pkg, mod+"guard/")
}

// TestCommitWalk follows the path of a guarded commit from its entry,
// Door.Commit (what the staging handle's flush, fsync and release call,
// with the path as parameter), through the guard (internal/calltrace):
// once statically, every branch, and once as one allowed commit really
// walks it — the static walk restricted to the blocks a commit of
// MEMORY.md by the owner executed (Go's coverage counters, reset just
// before the commit: TestWalkOneCommit). The commit's walk must stay
// linear: at most 15 stops and at most 3 returns to a file already left.
// go test -run TestCommitWalk -v ./guard prints both walks.
func TestCommitWalk(t *testing.T) {
	if os.Getenv(walkCommit) != "" {
		t.Skip("inside the walk's own run")
	}
	p, err := calltrace.Load("..", "./fs", "./guard/...")
	if err != nil {
		t.Fatal(err)
	}
	entry := p.Lookup("guard.(*Door).Commit")
	if entry == nil {
		t.Fatal("guard.(*Door).Commit not found")
	}
	static := p.Trace(entry, []string{"rel"}, inHouse, nil)
	t.Logf("every branch:\n%s", static)

	dir := t.TempDir()
	for _, run := range []string{"with", "without"} {
		cmd := exec.Command("go", "test", "-count=1", "-run", "^TestWalkOneCommit$", "-covermode=count",
			"-coverpkg=github.com/aerfs/aerfs/guard/...", "-coverprofile="+filepath.Join(dir, run), ".")
		cmd.Env = append(os.Environ(), walkCommit+"="+run)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the commit's own run (%s): %v\n%s", run, err, out)
		}
	}
	ran, err := calltrace.Diff(filepath.Join(dir, "with"), filepath.Join(dir, "without"))
	if err != nil {
		t.Fatal(err)
	}
	w := p.Trace(entry, []string{"rel"}, inHouse, ran)
	t.Logf("one commit:\n%s", w)
	if len(w.Stops) < 5 {
		t.Fatalf("the commit's walk has %d stops: the coverage of its run was not read", len(w.Stops))
	}
	if len(w.Stops) > 15 || w.Returns() > 3 {
		t.Errorf("the commit's walk has %d stops and %d returns to a file already left (at most 15 and 3)", len(w.Stops), w.Returns())
	}
}

// walkCommit says whether TestWalkOneCommit commits ("with") or does
// everything but ("without"); unset, it does not run.
const walkCommit = "AERFS_WALK_COMMIT"

// TestWalkOneCommit is one allowed commit of MEMORY.md by the owner:
// TestCommitWalk's run, made with and without the commit itself.
func TestWalkOneCommit(t *testing.T) {
	run := os.Getenv(walkCommit)
	if run == "" {
		t.Skip("run by TestCommitWalk")
	}
	h, ws, _ := testHouse(t, map[string]string{"MEMORY.md": "- the owner's note\n"})
	me := h.reg.Resolve(os.Getpid())
	st, err := h.dir.Lstat("MEMORY.md")
	if err != nil {
		t.Fatal(err)
	}
	dr, errno := draft.Open(h.dir, h.staging, "MEMORY.md", me, syscall.O_WRONLY|syscall.O_APPEND, false, label.KeyOf(st))
	if errno != 0 {
		t.Fatal(errno)
	}
	defer dr.Close()
	if _, errno := dr.Write(me, []byte("- another\n"), 0); errno != 0 {
		t.Fatal(errno)
	}
	if run != "with" {
		return
	}
	errno = (&Door{h: h}).Commit(Caller{Pid: os.Getpid(), UID: uint32(os.Geteuid())}, "MEMORY.md", dr, false) // as the close of a process
	if errno != 0 {
		t.Fatalf("commit: %v", errno)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "- the owner's note\n- another\n" {
		t.Fatalf("MEMORY.md = %q", b)
	}
}
