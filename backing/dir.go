package backing

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func nop() {}

// Dir is the backing directory.
type Dir struct {
	fd   int
	path string
}

// New wraps the descriptor of a backing directory (the caller keeps it
// open for the Dir's lifetime).
func New(fd int) *Dir { return &Dir{fd: fd, path: fmt.Sprintf("/proc/self/fd/%d", fd)} }

// Fd is the backing directory's descriptor.
func (d *Dir) Fd() int { return d.fd }

// Path is a path through which the backing directory can be reached by
// path-based calls and watched (the mount covers the workspace path).
func (d *Dir) Path() string { return d.path }

// Join joins a directory's relative path and a name ("" is the root).
func Join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

var beneath = uint64(unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS)

// OpenDir opens a directory by its relative path without following any
// symlink and without leaving the tree.
func (d *Dir) OpenDir(rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	if len(rel) > longRel {
		return d.openDirPieces(rel, unix.O_RDONLY)
	}
	return unix.Openat2(d.fd, rel, &unix.OpenHow{Flags: unix.O_DIRECTORY | unix.O_RDONLY | unix.O_CLOEXEC, Resolve: beneath})
}

// Lstat stats rel without following a final symlink. The path of a node
// never crosses a symlink: the kernel resolves symlinks itself, so a
// node's parents are real directories of the backing tree.
func (d *Dir) Lstat(rel string) (*syscall.Stat_t, error) {
	if rel == "" {
		rel = "."
	}
	fd, name, done := d.fd, rel, nop
	if len(rel) > longRel { // beyond one system call: piece by piece
		var err error
		if fd, name, done, err = d.ParentAt(rel); err != nil {
			return nil, err
		}
	}
	defer done()
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return (*syscall.Stat_t)(unsafe.Pointer(&st)), nil
}

// OpenFile opens rel without following symlinks anywhere on the way.
func (d *Dir) OpenFile(rel string, flags int) (*os.File, error) {
	dfd, name, done := d.fd, rel, nop
	if len(rel) > longRel { // beyond one system call: piece by piece
		var err error
		if dfd, name, done, err = d.ParentAt(rel); err != nil {
			return nil, err
		}
	}
	defer done()
	// aerfs's own reads (hashes, checks, page fills of guarded files) do
	// not touch the access time the owner's tools see: O_NOATIME where the
	// daemon may (it owns the file or holds CAP_FOWNER), else as asked.
	noatime := 0
	if flags&(unix.O_ACCMODE|unix.O_PATH) == unix.O_RDONLY {
		noatime = unix.O_NOATIME
	}
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{Flags: uint64(flags | noatime | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: beneath})
	if err == unix.EPERM && noatime != 0 {
		fd, err = unix.Openat2(dfd, name, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: beneath})
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// Open opens rel with flags (and mode, when they create) for a process
// of the mount, resolved like OpenFile: beneath the backing directory,
// through no symlink. It returns the raw descriptor.
func (d *Dir) Open(rel string, flags int, mode uint32) (int, error) {
	dfd, name, done := d.fd, rel, nop
	if len(rel) > longRel { // beyond one system call: piece by piece
		var err error
		if dfd, name, done, err = d.ParentAt(rel); err != nil {
			return -1, err
		}
	}
	defer done()
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: beneath}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(mode & 0o7777)
	}
	fd, err := unix.Openat2(dfd, name, how)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return fd, nil
}

// Readlink is what the symlink rel names (any length).
func (d *Dir) Readlink(rel string) ([]byte, error) {
	fd, name, done, err := d.ParentAt(rel)
	if err != nil {
		return nil, err
	}
	defer done()
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return nil, &os.PathError{Op: "readlink", Path: rel, Err: err}
		}
		if n < len(buf) {
			return buf[:n], nil
		}
	}
}

// Stat describes rel without following symlinks.
func (d *Dir) Stat(rel string) (os.FileInfo, error) {
	f, err := d.OpenFile(rel, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// Unlink removes rel (a directory with AT_REMOVEDIR).
func (d *Dir) Unlink(rel string, flags int) error {
	fd, name, done := d.fd, rel, nop
	if len(rel) > longRel { // beyond one system call: piece by piece
		var err error
		if fd, name, done, err = d.ParentAt(rel); err != nil {
			return err
		}
	}
	defer done()
	return unix.Unlinkat(fd, name, flags)
}

// Hash hashes a regular file without following symlinks and without
// blocking on anything that is not a regular file.
func (d *Dir) Hash(rel string) (string, error) {
	f, err := d.OpenFile(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", rel)
	}
	return HashReader(f)
}

// MkdirAll makes rel and its missing parents (0755).
func (d *Dir) MkdirAll(rel string) error {
	if rel == "" || rel == "." {
		return nil
	}
	if _, err := d.Lstat(rel); err == nil {
		return nil
	}
	if err := d.MkdirAll(path.Dir(rel)); err != nil {
		return err
	}
	fd, err := d.OpenDir(path.Dir(rel))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, path.Base(rel), 0o755); err != nil && err != unix.EEXIST {
		return err
	}
	return nil
}

// Walk calls fn for every entry below the directory rel (depth first,
// never through a symlink), with its path relative to rel. It returns the
// first directory or entry it could not read (an entry removed meanwhile
// is not one): a decision on what rel holds must not be made on part of
// it.
func (d *Dir) Walk(rel string, fn func(sub string, st *syscall.Stat_t)) error {
	var first error
	fail := func(sub string, err error) {
		if first == nil && !errors.Is(err, unix.ENOENT) {
			first = fmt.Errorf("%s: %w", Join(rel, sub), err)
		}
	}
	var walk func(sub string)
	walk = func(sub string) {
		fd, err := d.OpenDir(Join(rel, sub))
		if err != nil {
			fail(sub, err)
			return
		}
		f := os.NewFile(uintptr(fd), sub)
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil {
			fail(sub, err)
		}
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				fail(Join(sub, name), err)
				continue
			}
			child := Join(sub, name)
			fn(child, (*syscall.Stat_t)(unsafe.Pointer(&st)))
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				walk(child)
			}
		}
	}
	walk("")
	return first
}

// SyncPaths makes the given paths durable: each regular file's content
// and each one's directory (a rename is durable once its directory is).
// A path gone since is skipped (a directory gone or replaced: the nearest
// one that remains is flushed); the first error is returned. Only those:
// a syncfs of the whole backing file system would wait for everything
// every other program wrote there (minutes behind a large copy).
func (d *Dir) SyncPaths(paths []string) error {
	dirs := map[string]bool{}
	var first error
	for _, rel := range paths {
		dir, name := path.Split(rel)
		dir = strings.TrimSuffix(dir, "/")
		dfd, err := d.OpenDir(dir)
		for err != nil && dir != "" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
			// The directory is gone, or something else stands at its
			// name (a session's symbolic link): nothing of aerfs's is
			// left in it, but its removal is an entry of the nearest
			// directory that remains.
			dir, name = path.Dir(dir), ""
			if dir == "." {
				dir = ""
			}
			dfd, err = d.OpenDir(dir)
		}
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if name != "" { // else only the directory that remains
			if fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err == nil {
				var st unix.Stat_t
				if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
					if err := unix.Fsync(fd); err != nil && first == nil {
						first = err
					}
				}
				unix.Close(fd)
			}
		}
		if !dirs[dir] {
			dirs[dir] = true
			if err := unix.Fsync(dfd); err != nil && first == nil {
				first = err
			}
		}
		unix.Close(dfd)
	}
	return first
}

// Statx stats rel as go-fuse's loopback does (statx, with the birth time
// that makes up the inode's generation).
func (d *Dir) Statx(rel string, st *syscall.Stat_t) (gen uint64, err error) {
	if rel == "" {
		rel = "."
	}
	fd, name, done := d.fd, rel, nop
	if len(rel) > longRel { // beyond one system call: piece by piece
		var err error
		if fd, name, done, err = d.ParentAt(rel); err != nil {
			return 0, err
		}
	}
	defer done()
	return statxAt(fd, name, unix.AT_SYMLINK_NOFOLLOW, st)
}

// Fstatx is Statx of an open file.
func Fstatx(fd int, st *syscall.Stat_t) (gen uint64, err error) {
	return statxAt(fd, "", unix.AT_EMPTY_PATH, st)
}

func statxAt(fd int, name string, flags int, st *syscall.Stat_t) (gen uint64, err error) {
	var x unix.Statx_t
	if err := unix.Statx(fd, name, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return 0, err
	}
	st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	st.Ino = x.Ino
	st.Nlink = uint64(x.Nlink)
	st.Mode = uint32(x.Mode)
	st.Uid = x.Uid
	st.Gid = x.Gid
	st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	st.Size = int64(x.Size)
	st.Blksize = int64(x.Blksize)
	st.Blocks = int64(x.Blocks)
	st.Atim = syscall.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)}
	st.Mtim = syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)}
	st.Ctim = syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)}
	return Generation(&x), nil
}

// Generation is the inode generation go-fuse's loopback derives from a
// file's birth time (1 where the file system keeps none).
func Generation(x *unix.Statx_t) uint64 {
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		return uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return 1
}

// HashReader hashes f from its start with pread, leaving its offset alone.
func HashReader(f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ReadHash returns the SHA-256 of f's content and, when it is at most max
// bytes, the content itself (nil past it): a guarded commit reads small
// content once and hashes, stores and stages it from that one copy.
func ReadHash(f *os.File, max int64) ([]byte, string, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err == nil && st.Size <= max {
		data := make([]byte, st.Size)
		n, err := f.ReadAt(data, 0)
		if err != nil && err != io.EOF {
			return nil, "", err
		}
		if int64(n) == st.Size {
			// Nothing is past the end unless the file grew meanwhile.
			var one [1]byte
			if m, _ := f.ReadAt(one[:], st.Size); m == 0 {
				sum := sha256.Sum256(data)
				return data, hex.EncodeToString(sum[:]), nil
			}
		}
	}
	h, err := HashReader(f)
	return nil, h, err
}

// FdPath is the /proc path of an open file, for calls that take a path.
func FdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

// CopyXattrs gives the file open as fd the extended attributes of the
// file name in the directory dfd.
func CopyXattrs(dfd int, name string, fd int) {
	src, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer unix.Close(src)
	sz, err := unix.Flistxattr(src, nil)
	if err != nil || sz <= 0 {
		return
	}
	names := make([]byte, sz)
	if sz, err = unix.Flistxattr(src, names); err != nil {
		return
	}
	for _, attr := range strings.Split(strings.TrimRight(string(names[:sz]), "\x00"), "\x00") {
		if attr == "" {
			continue
		}
		vsz, err := unix.Fgetxattr(src, attr, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vsz)
		if vsz, err = unix.Fgetxattr(src, attr, val); err != nil {
			continue
		}
		unix.Fsetxattr(fd, attr, val[:vsz], 0)
	}
}

// Errno is the errno an error stands for (ENOTSUP when it stands for
// none), as go-fuse's ToErrno.
func Errno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case err == os.ErrPermission:
		return syscall.EPERM
	case err == os.ErrExist:
		return syscall.EEXIST
	case err == os.ErrNotExist:
		return syscall.ENOENT
	case err == os.ErrInvalid:
		return syscall.EINVAL
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.ENOTSUP
}
