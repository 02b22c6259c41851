package fs

import (
	"sync"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
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
// An alias is bound to the new backing file's generation (its birth time):
// a later file that reuses the inode number is not taken for it.

type inoAlias struct {
	gen  uint64          // the backing file's generation when it was aliased
	attr gofs.StableAttr // the identity the kernel knows it by
}

type aliasTable struct {
	n  atomic.Int32
	mu sync.Mutex
	m  map[fileKey]inoAlias
}

const maxAliases = 1 << 16

var inoAliases sync.Map // *Monitor → *aliasTable

func (m *Monitor) aliases() *aliasTable {
	if t, ok := inoAliases.Load(m); ok {
		return t.(*aliasTable)
	}
	t, _ := inoAliases.LoadOrStore(m, &aliasTable{m: map[fileKey]inoAlias{}})
	return t.(*aliasTable)
}

// kernelAttr is the identity a lookup reports for the backing file st of
// generation gen: attr, unless a commit gave the file the place of one the
// kernel knows.
func (m *Monitor) kernelAttr(st *syscall.Stat_t, gen uint64, attr gofs.StableAttr) gofs.StableAttr {
	t := m.aliases()
	if t.n.Load() == 0 {
		return attr
	}
	k := keyOf(st)
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.m[k]
	if !ok {
		return attr
	}
	if a.gen != gen || a.attr.Mode != st.Mode&syscall.S_IFMT {
		delete(t.m, k) // the number belongs to another file now
		t.n.Store(int32(len(t.m)))
		return attr
	}
	return a.attr
}

// identityBefore is the identity the kernel knows rel by, read just before
// a commit replaces it.
func (m *Monitor) identityBefore(rel string) (gofs.StableAttr, bool) {
	var st syscall.Stat_t
	gen, err := m.statAt(rel, &st)
	if err != nil {
		return gofs.StableAttr{}, false
	}
	return m.kernelAttr(&st, gen, m.loopbackAttr(&st, gen)), true
}

// noteReplaced gives the file open as fd, just renamed over a file known
// as prev, prev's identity.
func (m *Monitor) noteReplaced(prev gofs.StableAttr, fd int) {
	var x unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return
	}
	gen := uint64(1)
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	k := fileKey{Dev: uint64(unix.Mkdev(x.Dev_major, x.Dev_minor)), Ino: x.Ino}
	t := m.aliases()
	t.mu.Lock()
	if len(t.m) >= maxAliases {
		for old := range t.m {
			delete(t.m, old)
			break
		}
	}
	prev.Mode &= syscall.S_IFMT
	t.m[k] = inoAlias{gen: gen, attr: prev}
	t.n.Store(int32(len(t.m)))
	t.mu.Unlock()
}

// loopbackAttr is Node.stableAttr without a node: go-fuse's loopback
// identity of st relative to the backing directory's device.
func (m *Monitor) loopbackAttr(st *syscall.Stat_t, gen uint64) gofs.StableAttr {
	var root syscall.Stat_t
	if err := syscall.Fstat(m.rootFd, &root); err != nil {
		root.Dev = st.Dev
	}
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	rootDev := uint64(root.Dev)
	swappedRootDev := (rootDev << 32) | (rootDev >> 32)
	return gofs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Gen: gen, Ino: (swapped ^ swappedRootDev) ^ st.Ino}
}
