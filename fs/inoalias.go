package fs

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/txn"
)

// # One inode number per guarded file, across commits
//
// A guarded commit replaces the backing file by a rename: the content gets
// a new backing inode. Were that inode number passed on, a process holding
// the file open (fstat on its descriptor) and one looking the path up
// (stat) would see two different files, and careful writers — OpenClaw's
// staged writes compare the two — give up. So the kernel keeps the
// identity it knew: the new backing inode is reported under the identity
// (inode number and generation) of the one it replaced, and a lookup finds
// the same kernel inode as before the commit.
//
// The replaced inode stays referenced (an O_PATH descriptor) for as long as
// its number is reported for another file: the backing filesystem cannot
// give that number to a new file meanwhile, so two files never share one.
// Each alias also holds its current backing file; once that file has no
// name left, the alias and both references go. Past maxAliases files a
// commit is reported as before (a new inode number).

type inoAlias struct {
	gen  uint64          // the current backing file's generation
	attr gofs.StableAttr // the identity the kernel knows it by
	cur  *os.File        // the current backing file (to see it removed)
	pin  *os.File        // the inode attr names, kept so its number is not reused
}

// aliases is the alias table of one mount. It keeps the kernel's
// identities across the renames the guard's transaction publishes
// (txn.Identities).
type aliases struct {
	dir  *backing.Dir
	root atomic.Pointer[Node] // the mount's root, for Changed (attrcache.go)
	n    atomic.Int32
	mu   sync.Mutex
	m    map[label.Key]*inoAlias
}

var _ txn.Identities = (*aliases)(nil)

const maxAliases = 512

func newAliases(dir *backing.Dir) *aliases {
	return &aliases{dir: dir, m: map[label.Key]*inoAlias{}}
}

// kernelAttr is the identity a lookup reports for the backing file st of
// generation gen: attr, unless a commit gave the file the place of one the
// kernel knows.
func (t *aliases) kernelAttr(st *syscall.Stat_t, gen uint64, attr gofs.StableAttr) gofs.StableAttr {
	if t.n.Load() == 0 {
		return attr
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.m[label.KeyOf(st)]; ok && a.gen == gen && a.attr.Mode == st.Mode&syscall.S_IFMT {
		return a.attr
	}
	return attr
}

// replaced is what a commit notes before its rename: the identity the
// kernel knows the file by, and a reference that keeps its number.
type replaced struct {
	key  label.Key
	attr gofs.StableAttr
	pin  *os.File
}

// Before reads, just before a commit replaces the file old (open O_PATH),
// the identity the kernel knows it by, and keeps old open as the
// reference that holds its number (or closes it).
func (t *aliases) Before(old *os.File) any {
	var x unix.Statx_t
	if unix.Statx(int(old.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x) != nil || x.Mode&syscall.S_IFMT != syscall.S_IFREG {
		old.Close()
		return (*replaced)(nil)
	}
	gen := backing.Generation(&x)
	st := syscall.Stat_t{Dev: unix.Mkdev(x.Dev_major, x.Dev_minor), Ino: x.Ino, Mode: uint32(x.Mode)}
	r := &replaced{key: label.KeyOf(&st)}
	t.mu.Lock()
	a, ok := t.m[r.key]
	if ok && a.gen == gen {
		r.attr, r.pin = a.attr, a.pin // the alias moves on to the new file
	}
	t.mu.Unlock()
	if r.pin != nil {
		old.Close()
	} else {
		r.attr, r.pin = t.loopbackAttr(&st, gen), old
	}
	return r
}

// After gives the file open as fd, just renamed over prev's file, prev's
// identity.
func (t *aliases) After(prev any, fd int) {
	r, _ := prev.(*replaced)
	if r == nil {
		return
	}
	var x unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		t.Failed(r)
		return
	}
	gen := backing.Generation(&x)
	k := label.Key{Dev: uint64(unix.Mkdev(x.Dev_major, x.Dev_minor)), Ino: x.Ino}
	cur, err := os.Open("/proc/self/fd/" + itoa(fd))
	if err != nil {
		t.Failed(r)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.m[r.key]; ok && old.pin == r.pin {
		closeLater(old.cur)
		delete(t.m, r.key)
	}
	t.collect()
	if len(t.m) >= maxAliases {
		cur.Close()
		r.pin.Close()
		t.n.Store(int32(len(t.m)))
		return
	}
	r.attr.Mode &= syscall.S_IFMT
	t.m[k] = &inoAlias{gen: gen, attr: r.attr, cur: cur, pin: r.pin}
	t.n.Store(int32(len(t.m)))
}

// Failed forgets prev when the commit did not go through (its file is
// still in place).
func (t *aliases) Failed(prev any) {
	r, _ := prev.(*replaced)
	if r == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.m[r.key]; ok && a.pin == r.pin {
		return // still the alias of the file in place
	}
	r.pin.Close()
}

// collect drops the aliases whose file has no name left. Called with t.mu
// held.
func (t *aliases) collect() {
	for k, a := range t.m {
		var st syscall.Stat_t
		if syscall.Fstat(int(a.cur.Fd()), &st) == nil && st.Nlink > 0 {
			continue
		}
		closeLater(a.cur)
		closeLater(a.pin)
		delete(t.m, k)
	}
}

// closeLater closes a descriptor of a replaced file off the commit's path:
// it is often the last reference to the old version's inode, and closing
// it frees that inode's blocks (a hundred microseconds and more) — work the
// committing process need not wait for.
func closeLater(f *os.File) {
	closerOnce.Do(func() {
		closing = make(chan *os.File, 256)
		go func() {
			for f := range closing {
				f.Close()
			}
		}()
	})
	select {
	case closing <- f:
	default:
		f.Close()
	}
}

var (
	closerOnce sync.Once
	closing    chan *os.File
)

// loopbackAttr is Node.stableAttr without a node: go-fuse's loopback
// identity of st relative to the backing directory's device.
func (t *aliases) loopbackAttr(st *syscall.Stat_t, gen uint64) gofs.StableAttr {
	var root syscall.Stat_t
	if err := syscall.Fstat(t.dir.Fd(), &root); err != nil {
		root.Dev = st.Dev
	}
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	rootDev := uint64(root.Dev)
	swappedRootDev := (rootDev << 32) | (rootDev >> 32)
	return gofs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Gen: gen, Ino: (swapped ^ swappedRootDev) ^ st.Ino}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
