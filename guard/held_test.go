package guard

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// A policy edit held back by a plain descriptor open for writing says, when
// asked again, whether that descriptor is still open (PolicyChange.
// StillHeld): the daemon then tries the edit again, and walks the
// workspace, only once it is closed.
func TestPolicyChangeSaysWhileItIsStillHeld(t *testing.T) {
	h, _, _ := testHouse(t, map[string]string{"notes.md": "n\n", "other.md": "o\n"})
	g := &Guard{h: h}
	st, err := h.dir.Lstat("notes.md")
	if err != nil {
		t.Fatal(err)
	}
	w := h.opens.WriteOpened(label.KeyOf(st), os.Getpid(), func() {}, nil) // a plain writer, served by the kernel
	b, err := os.ReadFile("../configs/aerfs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(b), "\n    - MEMORY.md\n", "\n    - MEMORY.md\n    - notes.md\n", 1)
	pol, err := policy.Parse("aerfs.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := g.SetPolicy(pol, authority.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Held) != 1 || ch.Held[0] != "notes.md" || ch.StillHeld == nil {
		t.Fatalf("the edit did not hold notes.md: %+v", ch)
	}
	if !ch.StillHeld() {
		t.Fatal("StillHeld is false while notes.md's writer is open")
	}
	h.opens.WriteClosed(w)
	if ch.StillHeld() {
		t.Fatal("StillHeld is true after notes.md's writer closed")
	}
	ch, _ = g.SetPolicy(pol, authority.Config{})
	if len(ch.Held) != 0 || ch.StillHeld() {
		t.Fatalf("tried again after the close, the edit still holds: %+v", ch.Held)
	}
	if c, _, _ := h.gate.Policy().Classify("notes.md"); c != policy.Memory {
		t.Fatalf("notes.md is %v once the edit is in force, want memory", c)
	}
}

// A create the kernel sends for a guarded name that is already there in
// the backing directory (made behind the mount after the kernel's lookup
// found it absent) does not truncate it: the caller's O_TRUNC applies to
// its draft, and the file changes only through the draft's commit.
func TestCreateOfAGuardedFileAlreadyThereDoesNotTruncateIt(t *testing.T) {
	h, ws, _ := testHouse(t, map[string]string{"MEMORY.md": "kept\n"})
	d := &Door{h: h}
	var asked uint32
	o, errno := d.Create(Caller{Pid: os.Getpid(), UID: uint32(os.Geteuid())}, "MEMORY.md", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC,
		func(flags uint32) (*syscall.Stat_t, syscall.Errno) {
			asked = flags
			return backingCreate(h, "MEMORY.md")(flags)
		})
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	if o.Draft == nil {
		t.Fatal("a guarded create got no draft")
	}
	defer o.Draft.Close()
	if asked&syscall.O_TRUNC != 0 {
		t.Errorf("the backing open was asked to truncate the guarded file (flags %#x)", asked)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "kept\n" {
		t.Fatalf("MEMORY.md = %q after the create, before any commit", b)
	}
}

// A create that opens a file already there (made in the backing directory
// after the kernel's lookup found the name absent) without O_TRUNC keeps
// its content, and so what its label says of it: a web page so opened by
// the owner stays web content.
func TestCreateOfAnExistingFileWithoutTruncKeepsItsLabel(t *testing.T) {
	h, _, _ := testHouse(t, map[string]string{"notes/page.txt": "- obey the page\n"})
	d := &Door{h: h}
	st, err := h.dir.Lstat("notes/page.txt")
	if err != nil {
		t.Fatal(err)
	}
	web := &principal.Resolved{Identified: true, Principal: policy.Web, Proc: principal.Proc{ID: principal.ProcID{Tgid: 1, Start: 1}}}
	if _, err := h.flow.Next(flow.Move{Op: flow.Open, Subjects: []*principal.Resolved{web}, To: flow.Dest{Path: "notes/page.txt", Stat: st, Truncated: true}}); err != nil {
		t.Fatal(err)
	}
	if l := h.labels.Get(label.KeyOf(st)); l == nil || l.Taint&policy.WebDerived == 0 {
		t.Fatalf("the web page's label: %+v", l)
	}
	o, errno := d.Create(Caller{Pid: os.Getpid(), UID: uint32(os.Geteuid())}, "notes/page.txt", syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND, backingCreate(h, "notes/page.txt"))
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	if o.Plain == nil {
		t.Fatal("not followed as a plain writer")
	}
	if l := h.labels.Get(label.KeyOf(st)); l == nil || l.Taint&policy.WebDerived == 0 {
		t.Fatalf("after the owner's create without O_TRUNC, the web page is labelled %+v", l)
	}
}

// backingCreate is the node's backing open of rel for Door.Create: it
// returns the stat of the descriptor it opened.
func backingCreate(h *house, rel string) func(flags uint32) (*syscall.Stat_t, syscall.Errno) {
	return func(flags uint32) (*syscall.Stat_t, syscall.Errno) {
		fd, err := h.dir.Open(rel, int(flags), 0o644)
		if err != nil {
			return nil, syscall.EIO
		}
		defer syscall.Close(fd)
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, syscall.EIO
		}
		return &st, 0
	}
}
