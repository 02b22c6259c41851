package draft

import (
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/principal"
)

// stagingInMemory is the size up to which staged content stays in memory.
// Guarded files are memory, identity and configuration files, kilobytes in
// practice; past this a handle's staging moves to the state directory.
const stagingInMemory = 16 << 20

// Draft is the staged content of one handle on a guarded file.
type Draft struct {
	dir    string // the state directory's staging directory
	opener *principal.Resolved
	key    label.Key // inode at open

	mu      sync.Mutex
	staging *os.File
	onDisk  bool // staging was moved out of memory (spill)
	append  bool
	dirty   bool // written since the last commit
	// truncated: opened with O_TRUNC (or created) and not committed since.
	// A shell's "> MEMORY.md" opens, dup2()s and closes the first
	// descriptor before writing: committing the empty file at that first
	// flush would publish a version nobody meant. The truncation alone is
	// committed at release, if nothing was written by then.
	truncated bool
	// created: the file did not exist before this handle created it
	// (empty, as a placeholder); its first commit has no previous version.
	created bool
	closed  bool
	writers tracking.WriterSet
	// appendOnly: every change since baseLen (the content at open, then
	// at the last commit) is an append at the end (O_APPEND, or every
	// write landed at the end of the file).
	appendOnly bool
	baseLen    int64
	// fresh: opened with O_TRUNC (or created) and not committed since:
	// what the handle commits does not keep the content it found.
	fresh bool
	held  *tracking.Writer // the handle as a writer of the file (tracking.Opens)
}

// Hold keeps the handle's entry among the file's writers until Held is
// asked for it at its release.
func (d *Draft) Hold(w *tracking.Writer) { d.held = w }

// Held is the handle's entry among the file's writers.
func (d *Draft) Held() *tracking.Writer { return d.held }

// Open stages a copy of the file at rel (empty with O_TRUNC) for the
// opener res. created: the handle created the file (an empty placeholder).
func Open(dir *backing.Dir, stagingDir, rel string, res *principal.Resolved, flags uint32, created bool, key label.Key) (*Draft, syscall.Errno) {
	var src *os.File
	var size int64
	if flags&syscall.O_TRUNC == 0 {
		var err error
		if src, err = dir.OpenFile(rel, unix.O_RDONLY); err == nil {
			defer src.Close()
			if fi, err := src.Stat(); err == nil {
				size = fi.Size()
			}
		} else if !os.IsNotExist(err) {
			return nil, backing.Errno(err)
		}
	}
	f, onDisk, err := New(stagingDir, size)
	if err != nil {
		return nil, syscall.EIO
	}
	if src != nil {
		if _, err := io.Copy(f, src); err != nil {
			f.Close()
			return nil, backing.Errno(err)
		}
	}
	d := &Draft{dir: stagingDir, opener: res, key: key, staging: f, onDisk: onDisk,
		append: flags&syscall.O_APPEND != 0, truncated: flags&syscall.O_TRUNC != 0,
		appendOnly: flags&syscall.O_TRUNC == 0, created: created, fresh: flags&syscall.O_TRUNC != 0}
	if fi, err := f.Stat(); err == nil {
		d.baseLen = fi.Size()
	}
	d.writers.Note(res)
	return d, 0
}

// Key is the inode the file had when the handle opened it.
func (d *Draft) Key() label.Key { return d.key }

// New returns a staging file for content of the given size: in memory
// (memfd: no inode allocation and no unlink in the state directory's
// filesystem, which on ext4 are a good part of a small commit) up to
// stagingInMemory, in dir past it or where memfd is not available.
func New(dir string, size int64) (f *os.File, onDisk bool, err error) {
	if size <= stagingInMemory {
		if fd, err := unix.MemfdCreate("aerfs-stage", unix.MFD_CLOEXEC); err == nil {
			return os.NewFile(uintptr(fd), "aerfs-stage"), false, nil
		}
	}
	f, err = onDiskFile(dir)
	return f, true, err
}

func onDiskFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "stage-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// room moves the staging to disk before it grows past stagingInMemory, so
// that a large write costs disk, not the daemon's memory. Called with d.mu
// held.
func (d *Draft) room(end int64) error {
	if d.onDisk || end <= stagingInMemory {
		return nil
	}
	f, err := onDiskFile(d.dir)
	if err != nil {
		return err
	}
	pos, err := d.staging.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = io.Copy(f, io.NewSectionReader(d.staging, 0, 1<<62))
	}
	if err == nil {
		_, err = f.Seek(pos, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return err
	}
	d.staging.Close()
	d.staging, d.onDisk = f, true
	return nil
}

// ReadAt reads the staged content.
func (d *Draft) ReadAt(dest []byte, off int64) ([]byte, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := d.staging.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		return nil, backing.Errno(err)
	}
	return dest[:n], 0
}

// Write stages data at off for the writer w (at the end with O_APPEND).
func (d *Draft) Write(w *principal.Resolved, data []byte, off int64) (uint32, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.staging.Stat()
	if err != nil {
		return 0, backing.Errno(err)
	}
	if d.append {
		off = st.Size()
	} else if off != st.Size() {
		d.appendOnly = false
	}
	d.writers.Note(w)
	if err := d.room(off + int64(len(data))); err != nil {
		return 0, backing.Errno(err)
	}
	n, err := d.staging.WriteAt(data, off)
	d.dirty = true
	return uint32(n), backing.Errno(err)
}

// Lseek seeks in the staged content (SEEK_DATA, SEEK_HOLE …).
func (d *Draft) Lseek(off int64, whence int) (int64, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := unix.Seek(int(d.staging.Fd()), off, whence)
	return n, backing.Errno(err)
}

// Allocate allocates (fallocate) in the staged content for w.
func (d *Draft) Allocate(w *principal.Resolved, off, size int64, mode uint32) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writers.Note(w)
	if err := d.room(off + size); err != nil {
		return backing.Errno(err)
	}
	d.dirty, d.appendOnly = true, false
	return backing.Errno(unix.Fallocate(int(d.staging.Fd()), mode, off, size))
}

// Truncate sets the staged content's size for w (ftruncate).
func (d *Draft) Truncate(w *principal.Resolved, size int64) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writers.Note(w)
	if fi, err := d.staging.Stat(); err != nil || fi.Size() != size {
		d.appendOnly = false
	}
	err := d.room(size)
	if err == nil {
		err = d.staging.Truncate(size)
	}
	d.dirty = true
	return backing.Errno(err)
}

// Size is the staged content's size.
func (d *Draft) Size() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fi, err := d.staging.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Close closes the draft at the handle's release. It reports whether the
// handle's empty placeholder was never committed (it goes then), and
// whether it was closed already.
func (d *Draft) Close() (placeholder, wasClosed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, true
	}
	d.closed = true
	d.staging.Close()
	return d.created, false
}
