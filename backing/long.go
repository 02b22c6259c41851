package backing

import (
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// # Long paths
//
// The kernel hands the file system one name at a time, so a directory
// chain may be far deeper than PATH_MAX (4,096 bytes) below the mount. A
// system call refuses a path that long (ENAMETOOLONG) although every name
// in it is legal. Below longRel bytes a path goes to one *at call relative
// to the backing directory's descriptor, as always; above it, the parent
// directory is opened piece by piece (each piece a whole number of names,
// at most longRel bytes, resolved beneath the directory before it and
// never through a symlink) and the call is made relative to it.

// longRel is the longest relative path handed to one system call. The
// loopback's absolute paths add /proc/self/fd/N/ to it.
const longRel = 3800

// Long reports whether rel is too long for one system call.
func Long(rel string) bool { return len(rel) > longRel }

// OpenDirPieces opens the directory rel piece by piece; the last piece is
// opened with flags (O_PATH for a parent used only as a dirfd).
func (d *Dir) OpenDirPieces(rel string, flags int) (int, error) { return d.openDirPieces(rel, flags) }

func (d *Dir) openDirPieces(rel string, flags int) (int, error) {
	fd := d.fd
	owned := false
	for rel != "" {
		piece := rel
		if len(piece) > longRel {
			i := strings.LastIndexByte(rel[:longRel], '/')
			if i <= 0 {
				return -1, syscall.ENAMETOOLONG
			}
			piece = rel[:i]
		}
		rest := strings.TrimPrefix(rel[len(piece):], "/")
		fl := unix.O_PATH | unix.O_DIRECTORY
		if rest == "" {
			fl = flags | unix.O_DIRECTORY
		}
		nfd, err := unix.Openat2(fd, piece, &unix.OpenHow{Flags: uint64(fl | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: beneath})
		if owned {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd, owned = nfd, true
		rel = rest
	}
	if !owned {
		return unix.Openat(d.fd, ".", flags|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	return fd, nil
}

// ParentAt returns a directory descriptor and a name through which rel can
// be reached by one *at call, and the function that releases the
// descriptor. For a short rel that is the backing directory and rel itself.
func (d *Dir) ParentAt(rel string) (int, string, func(), error) {
	if !Long(rel) {
		return d.fd, rel, func() {}, nil
	}
	dir, name := path.Split(rel)
	fd, err := d.openDirPieces(strings.TrimSuffix(dir, "/"), unix.O_PATH)
	if err != nil {
		return -1, "", nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, name, func() { unix.Close(fd) }, nil
}
