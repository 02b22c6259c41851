package draft

import (
	"io"
	"os"
	"syscall"

	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/principal"
)

// Pending is a draft being committed: its lock is held from Pending to
// Done.
type Pending struct {
	d      *Draft
	staged *os.File
}

// Due reports whether a commit of the draft (last: at the handle's
// release) has something to commit, and the processes that wrote it, to
// be resolved as they are now (tracking.Resolve) before Pending takes the
// draft's lock: reading their /proc may wait for this daemon
// (principal/procwait.go).
func (d *Draft) Due(last bool) ([]principal.ProcID, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || !d.dirty && !(last && d.truncated) {
		return nil, false
	}
	return d.writers.IDs(), true
}

// Pending starts a commit of the draft (last: at the handle's release),
// or returns nil when there is nothing to commit.
func (d *Draft) Pending(last bool) *Pending {
	d.mu.Lock()
	if d.closed || !d.dirty && !(last && d.truncated) {
		d.mu.Unlock()
		return nil
	}
	d.dirty, d.truncated = false, false
	return &Pending{d: d, staged: d.staging}
}

// Writers is every resolution the commit must be allowed for: each writer
// as it is now (now: the resolutions of Due's writers) and as it was when
// it wrote, the opener first.
func (p *Pending) Writers(now []*principal.Resolved) []*principal.Resolved {
	w := p.d.writers.With(now)
	if len(w) == 0 {
		w = []*principal.Resolved{p.d.opener}
	}
	return w
}

// Rebase reports whether the commit appends to the file's content of the
// moment (Content's cur): the handle's changes since its base are all
// appends.
func (p *Pending) Rebase() bool {
	d := p.d
	return d.appendOnly || d.append && d.created // an O_APPEND handle that created the file appended to nothing
}

// Content is the content the commit publishes (called with the path's
// lock held): the staged content, or, when Rebase, the current content
// cur (nil: deleted since) followed by what the handle appended.
func (p *Pending) Content(cur *os.File) (*os.File, syscall.Errno) {
	if !p.Rebase() {
		return p.staged, 0
	}
	var size int64
	if cur != nil {
		fi, err := cur.Stat()
		if err != nil {
			return nil, syscall.EIO
		}
		size = fi.Size()
	}
	f, err := p.concat(cur, size)
	if err != nil {
		return nil, syscall.EIO
	}
	p.staged = f
	return f, 0
}

// Extends reports whether the content committed keeps the content the
// handle found (it was not opened with O_TRUNC, or it committed since):
// that content's label flows into the new one.
func (p *Pending) Extends() bool { return !p.d.fresh }

// Created is the inode of the empty placeholder the handle created and
// has not committed over yet (nil: none).
func (p *Pending) Created() *label.Key {
	if !p.d.created {
		return nil
	}
	k := p.d.key
	return &k
}

// concat makes a new staging file holding head (size bytes, deleted since
// when nil) followed by what the draft appended past its base.
func (p *Pending) concat(head *os.File, size int64) (*os.File, error) {
	d := p.d
	sfi, err := d.staging.Stat()
	if err != nil {
		return nil, err
	}
	tail := max(sfi.Size()-d.baseLen, 0)
	f, _, err := New(d.dir, size+tail)
	if err != nil {
		return nil, err
	}
	if head != nil {
		if _, err := io.Copy(f, io.NewSectionReader(head, 0, size)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if _, err := io.Copy(f, io.NewSectionReader(d.staging, d.baseLen, tail)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Done ends the commit (committed or not) and releases the draft.
func (p *Pending) Done(committed bool) {
	d := p.d
	defer d.mu.Unlock()
	if p.staged != d.staging {
		if !committed {
			p.staged.Close()
		} else {
			// The handle now holds what it committed; later appends are
			// relative to that.
			d.staging.Close()
			d.staging = p.staged
			if fi, err := p.staged.Stat(); err == nil && fi.Size() > stagingInMemory {
				d.onDisk = true
			}
		}
	}
	if committed {
		d.created, d.fresh = false, false
		d.appendOnly = true
		if fi, err := d.staging.Stat(); err == nil {
			d.baseLen = fi.Size()
		}
	}
}
