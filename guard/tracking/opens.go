package tracking

import (
	"sync"
	"time"

	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/principal"
)

// # Who has a file open
//
// Plain files are read and written through kernel passthrough: once a
// descriptor is open, the daemon never sees what passes through it. So a
// process that opened a file to read it before an untrusted writer opened
// it to write reads the writer's bytes unseen. Opens keeps, for every
// inode, the handles open for writing and the readers that may read what
// they write: each reader whose handle is open, and each one that opened
// the file while a writer had it open (it may have read and closed
// before the writer's close). When content of a lower label is written
// under them, the label flow taints them all (Readers).

// maxExposed bounds the readers remembered for one inode while it is
// being written; past it the oldest are forgotten (they were tainted at
// the writer's closes so far).
const maxExposed = 1024

// Opens counts, per inode, the handles open for writing through the mount
// (a file being written has a fingerprint that moves under its label,
// which must not be read as drift) and knows its readers.
type Opens struct {
	mu    sync.Mutex
	files map[label.Key]*inode
	binds [bindStripes]sync.Mutex
}

const bindStripes = 64

// Binding serialises, per inode, binding a plain file's label to its
// fingerprint (a written handle's close) with deciding whether a
// fingerprint that moved is drift. A close binds to a fingerprint it
// takes inside the lock, so two closes answered in either order leave
// the newer one bound, and a drift check inside the lock sees either the
// writer still open or its binding made. It returns the unlock.
func (o *Opens) Binding(k label.Key) (unlock func()) {
	m := &o.binds[(k.Ino^k.Dev*0x9e3779b97f4a7c15)%bindStripes]
	m.Lock()
	return m.Unlock
}

type inode struct {
	writers int
	readers map[*Reader]struct{} // open read handles
	exposed []*principal.Resolved
	settle  []*Writer // the handles whose label can be brought up to date with their writers as they are now
}

// Writer is one handle open for writing.
type Writer struct {
	key    label.Key
	opener int // the process that opened the handle (its tgid), 0 unknown
	settle func()
	enrol  func(*principal.Resolved)
}

// Reader is one read handle of a plain file.
type Reader struct {
	key label.Key
	res *principal.Resolved
}

func (o *Opens) file(k label.Key) *inode {
	if o.files == nil {
		o.files = map[label.Key]*inode{}
	}
	f := o.files[k]
	if f == nil {
		f = &inode{}
		o.files[k] = f
	}
	return f
}

func (o *Opens) drop(k label.Key, f *inode) {
	if f.writers == 0 && len(f.readers) == 0 {
		delete(o.files, k)
	}
}

// WriteOpened notes a handle open for writing on k: every reader that has
// k open may read what it writes. settle, when not nil, brings k's label
// up to date with the handle's writers as they are now (Settle calls it);
// enrol, when not nil, counts a process among the handle's writers
// (Enrol).
func (o *Opens) WriteOpened(k label.Key, opener int, settle func(), enrol func(*principal.Resolved)) *Writer {
	w := &Writer{key: k, opener: opener, settle: settle, enrol: enrol}
	o.mu.Lock()
	f := o.file(k)
	f.writers++
	for r := range f.readers {
		f.expose(r.res)
	}
	if settle != nil {
		f.settle = append(f.settle, w)
	}
	o.mu.Unlock()
	return w
}

// WriteClosed notes that the handle w was released.
func (o *Opens) WriteClosed(w *Writer) {
	o.mu.Lock()
	if f := o.files[w.key]; f != nil {
		for i, x := range f.settle {
			if x == w {
				f.settle = append(f.settle[:i], f.settle[i+1:]...)
				break
			}
		}
		if f.writers > 0 {
			f.writers--
		}
		if f.writers == 0 {
			f.exposed = nil
		}
		o.drop(w.key, f)
	}
	o.mu.Unlock()
}

// Settle brings up to date the labels of the files res may have read
// while they were being written — open to read, or opened while a writer
// had them open — from their writers as they are now, before a decision
// about res: a writer that was clean when it opened the file may have
// been tainted since, and its bytes reached res unseen (passthrough).
func (o *Opens) Settle(res *principal.Resolved) {
	me := readerOf(res)
	var todo []func()
	o.mu.Lock()
	for _, f := range o.files {
		if len(f.settle) == 0 {
			continue
		}
		hit := false
		for r := range f.readers {
			hit = hit || readerOf(r.res) == me
		}
		for _, x := range f.exposed {
			hit = hit || readerOf(x) == me
		}
		if hit {
			for _, w := range f.settle {
				todo = append(todo, w.settle)
			}
		}
	}
	o.mu.Unlock()
	for _, s := range todo {
		s()
	}
}

// SettleFile brings the label of k up to date from its writers as they
// are now, when it is open for writing (a writer that was clean when it
// opened the file may have been tainted since, and what it wrote since is
// in the file: passthrough): before a decision on the file's content (an
// exec, a read). It reports whether k was open for writing.
func (o *Opens) SettleFile(k label.Key) bool {
	o.mu.Lock()
	f := o.files[k]
	if f == nil || f.writers == 0 {
		o.mu.Unlock()
		return false
	}
	var todo []func()
	for _, w := range f.settle {
		todo = append(todo, w.settle)
	}
	o.mu.Unlock()
	for _, s := range todo {
		s()
	}
	return true
}

// Enrol counts res among the writers of every handle of k open for
// writing whose label follows its writers, and reports how many there
// are: res holds a descriptor of one of them that it did not open (a
// session's command inherits it), through which it writes unseen. The
// caller settles the file next (SettleFile).
func (o *Opens) Enrol(k label.Key, res *principal.Resolved) int {
	var todo []func(*principal.Resolved)
	o.mu.Lock()
	if f := o.files[k]; f != nil {
		for _, w := range f.settle {
			if w.enrol != nil {
				todo = append(todo, w.enrol)
			}
		}
	}
	o.mu.Unlock()
	for _, e := range todo {
		e(res)
	}
	return len(todo)
}

// Writing reports whether k is open for writing through the mount.
func (o *Opens) Writing(k label.Key) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.files[k]
	return f != nil && f.writers > 0
}

// OpenReaders are the processes k is open for reading by now.
func (o *Opens) OpenReaders(k label.Key) []*principal.Resolved {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*principal.Resolved
	if f := o.files[k]; f != nil {
		for r := range f.readers {
			out = append(out, r.res)
		}
	}
	return out
}

// AnyWriting reports whether any file is open for writing.
func (o *Opens) AnyWriting() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.files {
		if f.writers > 0 {
			return true
		}
	}
	return false
}

// Passthrough reports whether k is open for writing through a plain
// handle, whose writes the kernel serves without the daemon. A close
// returns before the kernel's release of its handle reaches the daemon:
// a handle that goes within wait is not counted. Handles the process
// except opened itself are not counted (0: every handle counts).
func (o *Opens) Passthrough(k label.Key, wait time.Duration, except int) bool {
	deadline := time.Now().Add(wait)
	for {
		o.mu.Lock()
		open := false
		if f := o.files[k]; f != nil {
			for _, w := range f.settle {
				if except == 0 || w.opener != except {
					open = true
					break
				}
			}
		}
		o.mu.Unlock()
		if !open || !time.Now().Before(deadline) {
			return open
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ReadOpened notes that res opened k to read it; Closed says when the
// handle goes.
func (o *Opens) ReadOpened(k label.Key, res *principal.Resolved) *Reader {
	r := &Reader{key: k, res: res}
	o.mu.Lock()
	f := o.file(k)
	if f.readers == nil {
		f.readers = map[*Reader]struct{}{}
	}
	f.readers[r] = struct{}{}
	if f.writers > 0 {
		f.expose(res)
	}
	o.mu.Unlock()
	return r
}

// Closed notes that the read handle r was released.
func (o *Opens) Closed(r *Reader) {
	o.mu.Lock()
	if f := o.files[r.key]; f != nil {
		delete(f.readers, r)
		o.drop(r.key, f)
	}
	o.mu.Unlock()
}

// Readers is every reader that may have read what is written to k now:
// its open readers and those that opened it while it was being written.
func (o *Opens) Readers(k label.Key) []*principal.Resolved {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.files[k]
	if f == nil {
		return nil
	}
	out := append([]*principal.Resolved(nil), f.exposed...)
	for r := range f.readers {
		out = append(out, r.res)
	}
	return out
}

// expose remembers res as a reader of what is being written. Called with
// the lock held.
func (f *inode) expose(res *principal.Resolved) {
	for _, x := range f.exposed {
		if x == res {
			return
		}
	}
	if len(f.exposed) >= maxExposed {
		f.exposed = f.exposed[1:]
	}
	f.exposed = append(f.exposed, res)
}
