package guard

import (
	"os"
	"syscall"
	"testing"

	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// A session that starts with a descriptor open for writing on a file no
// followed handle writes (its opener was unidentified) gets a handle of
// its own: the file takes the session's label at once and counts as being
// written until the session is over. A session that starts with a
// descriptor to read a file whose name is gone takes the label the file
// has by its identity.
func TestInheritedWithoutAFollowedHandleOrAName(t *testing.T) {
	h, _, _ := testHouse(t, map[string]string{"notes.txt": "owner's notes\n"})
	d := &Door{h: h}
	st, err := h.dir.Lstat("notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	k := label.KeyOf(st)
	web := &principal.Resolved{Identified: true, Principal: policy.Web, Proc: principal.Proc{ID: principal.ProcID{Tgid: 1, Start: 1}}}
	release, took, errno := d.inherited(web, Held{Rel: "notes.txt", Stat: st, Named: true, Flags: syscall.O_WRONLY | syscall.O_APPEND})
	if errno != 0 || took != "write" || release == nil {
		t.Fatalf("inherited for writing: %q, %v", took, errno)
	}
	if l := h.labels.Get(k); l == nil || l.Taint&policy.WebDerived == 0 {
		t.Fatalf("notes.txt held for writing by a WEB session is labelled %+v", l)
	}
	if !h.opens.Writing(k) {
		t.Fatal("notes.txt does not count as being written while the WEB session holds it")
	}

	// The name goes; a clean process starts a session holding the file
	// to read. It takes the WEB label by the file's identity.
	me := h.reg.Resolve(os.Getpid())
	if !me.Identified || me.Subject().Taint != 0 {
		t.Fatalf("the test's own process: %+v", me.Subject())
	}
	if err := os.Remove(h.dir.Path() + "/notes.txt"); err != nil {
		t.Fatal(err)
	}
	byIno := &syscall.Stat_t{Dev: st.Dev, Ino: st.Ino, Mode: st.Mode, Size: st.Size}
	readRelease, took, errno := d.inherited(me, Held{Rel: "notes.txt", Stat: byIno, Flags: syscall.O_RDONLY})
	if errno != 0 || took != "read" {
		t.Fatalf("inherited for reading by its identity: %q, %v", took, errno)
	}
	if me.Subject().Taint&policy.WebDerived == 0 {
		t.Fatalf("a reader of the WEB-labelled file by its identity is not tainted: %v", me.Subject().Taint)
	}
	found := false
	for _, r := range h.opens.Readers(k) {
		found = found || r == me
	}
	if !found {
		t.Fatal("the session is not among the file's readers")
	}
	readRelease()
	release()
	if h.opens.Writing(k) {
		t.Fatal("the WEB session's own handle outlived its release")
	}
}

// What holding a file to read adds, undecided: a secret is a secret read
// whoever holds it (even a principal the gate refuses secrets to), and a
// labelled file adds its label's taint.
func TestHeldReadAddsWhatAnOpenWould(t *testing.T) {
	h, _, _ := testHouse(t, nil)
	web := &principal.Resolved{Identified: true, Principal: policy.Web, Proc: principal.Proc{ID: principal.ProcID{Tgid: 1, Start: 1}}}
	if add := h.gate.Held(web, policy.Target{Class: policy.Secret}); add&policy.SecretRisk == 0 {
		t.Fatalf("a WEB session holding a secret: %v, want SECRET_RISK", add)
	}
	me := h.reg.Resolve(os.Getpid())
	if add := h.gate.Held(me, policy.Target{Class: policy.Plain, LabelTaint: policy.WebDerived}); add&policy.WebDerived == 0 {
		t.Fatalf("holding a WEB-labelled plain file: %v, want WEB_DERIVED", add)
	}
}
