package guard

import (
	"syscall"

	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Held is a descriptor of a plain file on the mount that a process holds
// as it starts a session (Inherited).
type Held struct {
	// Rel is the name the descriptor was opened by (without the kernel's
	// " (deleted)"); when Named, that name still holds the file.
	Rel string
	// Stat is the file's: taken at Rel when Named; otherwise (renamed,
	// unlinked or replaced since it was opened) only its identity is
	// sure (device and inode number), and its label is found by that.
	Stat  *syscall.Stat_t
	Named bool
	Flags uint32 // the descriptor's open flags
}

// Inherited takes a descriptor of a plain file that the process c holds
// as it starts a session, for the session's command to inherit:
// `aerfs run … > notes.txt`, `aerfs run … < page.txt`. The shell that
// opened it is the handle's opener, not the session, and kernel
// passthrough serves its reads and writes without a request reaching
// aerfs. So the session counts as having opened it itself:
//
//   - a reader of it: it takes the file's label now, and is among the
//     file's open readers until the session is retired, so that what is
//     written into it meanwhile reaches it. Whether the session still
//     holds the file cannot be told from outside: a mapping, a thread
//     whose group leader exited, a descriptor in flight over a socket
//     read it without a trace in /proc/<pid>/fd;
//   - a writer of it: every handle of the file open for writing whose
//     label follows its writers counts the session among them from now on,
//     and the label is recomputed at once (its readers take it); when no
//     handle is followed (an unidentified opener), the session's own is.
//
// The file is taken by its identity, whatever name it has now. Guarded
// files need none of this: their writes and page fills reach aerfs, each
// with its caller. It returns what to call once the session is over (nil:
// nothing was taken) and the access taken ("read", "write",
// "read-write"; empty: none). EIO: the session's label on the file could
// not be stored (a full state disk): the session must not start.
func (d *Door) Inherited(c Caller, hd Held) (release func(), took string, errno syscall.Errno) {
	if hd.Stat == nil || hd.Stat.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, "", 0
	}
	res := d.h.gate.Resolve(c)
	if !res.Identified {
		return nil, "", 0
	}
	return d.inherited(res, hd)
}

// inherited is Inherited for the session's resolved process res.
func (d *Door) inherited(res *principal.Resolved, hd Held) (release func(), took string, errno syscall.Errno) {
	h := d.h
	st := hd.Stat
	k := label.KeyOf(st)
	h.opens.SettleFile(k)
	var t policy.Target
	var l *label.Label
	if hd.Named {
		t, l = h.gate.Target(hd.Rel, st)
	} else {
		// No name holds it: its label by its identity, its class by the
		// name it was opened by.
		t, _ = h.gate.Target(hd.Rel, nil)
		l = h.labels.Get(k)
		t.LabelTaint, t.Absent = l.ReadTaint(), false
	}
	if t.Class.Guarded() {
		return nil, "", 0
	}
	acc := hd.Flags & syscall.O_ACCMODE
	var reading *Reading
	if acc != syscall.O_WRONLY {
		h.flow.Next(flow.Move{Op: flow.Read, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{l}, To: flow.Dest{Path: hd.Rel}, Add: h.gate.Held(res, t)})
		reading = h.readBy(res, hd.Rel, st, l)
		took = "read"
	}
	var own *Plain
	if acc != syscall.O_RDONLY {
		if h.opens.Enrol(k, res) > 0 {
			h.opens.SettleFile(k)
		} else if own, errno = d.plainWriter(res, hd.Rel, st, l, false); errno != 0 {
			reading.Close()
			return nil, "", errno
		}
		if took == "" {
			took = "write"
		} else {
			took = "read-write"
		}
	}
	return func() {
		reading.Close()
		if own != nil {
			own.Release(func() *syscall.Stat_t {
				st, err := h.dir.Lstat(own.rel)
				if err != nil {
					return nil
				}
				return st
			})
		}
	}, took, 0
}
