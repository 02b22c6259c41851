package guard

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/guard/label"
)

// # A plain label's binding across the changes aerfs makes
//
// A plain file's label is bound to its fingerprint (size, mtime, ctime),
// and a fingerprint that moved without aerfs is drift: the content reads
// as EXTERNAL. A rename, a link and the unlink of one of several names,
// made through the mount, move the inode's ctime and nothing else, so the
// binding follows them (an agent saving its state as every client does, a
// temporary file renamed over the real one, read it back as drift before,
// and its session was tainted UNTRUSTED). Only a binding that held before
// the change is carried over: content changed behind aerfs's back stays
// drift.

// held is a label's binding carried across a change of its file's names:
// the inode, pinned, and its fingerprint before the change.
type held struct {
	f      *os.File
	before *syscall.Stat_t
}

// hold pins the file at rel (stat st, as the change was decided on) when
// it carries a plain label bound to st; nil when there is nothing to
// carry.
func (h *house) hold(rel string, st *syscall.Stat_t) *held {
	if st == nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil
	}
	if l := h.labels.Get(label.KeyOf(st)); l == nil || l.Kind != 0 || !l.Matches(st) {
		return nil
	}
	f, err := h.dir.OpenFile(rel, unix.O_PATH)
	if err != nil {
		return nil
	}
	var now syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &now) != nil || label.KeyOf(&now) != label.KeyOf(st) {
		f.Close() // another file holds the name by now
		return nil
	}
	return &held{f: f, before: st}
}

// keep binds the label to the inode's fingerprint after the change when
// only its ctime moved (size and mtime as before, the label still the one
// bound before), and lets the inode go. nil does nothing.
func (b *held) keep(h *house) {
	if b == nil {
		return
	}
	defer b.f.Close()
	var st syscall.Stat_t
	if syscall.Fstat(int(b.f.Fd()), &st) != nil || st.Size != b.before.Size || st.Mtim != b.before.Mtim {
		return
	}
	k := label.KeyOf(&st)
	if l := h.labels.Get(k); l != nil && l.Matches(b.before) && !l.Matches(&st) {
		l.Bind(&st)
		h.labels.Set(k, l)
	}
}
