package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// guardedFile is the handle of a guarded file opened for writing. Writes go
// to a staging file in the state directory; the backing file changes only
// when commit replaces it whole, after a second decision. It implements no
// PassthroughFd, so the kernel sends every read and write here.
type guardedFile struct {
	m    *Monitor
	node *Node
	res  *principal.Resolved // the opener: the decision is bound to it
	key  fileKey             // inode at open, for the open-for-write count

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
	// writers are the processes that wrote through this handle, the
	// opener first (a descriptor may be inherited or passed over a
	// socket). At commit each is resolved again and each must be allowed.
	writers writerSet
	// appendOnly: every change since baseLen/baseHash (the content at
	// open, then at the last commit) is an append at the end (O_APPEND,
	// or every write landed at the end of the file). Such a handle is
	// rebased at commit onto the file's content of that moment, so that
	// concurrent appenders all land.
	appendOnly bool
	baseLen    int64
}

// noteWriter remembers who wrote through the handle. Called with g.mu held.
func (g *guardedFile) noteWriter(ctx context.Context) {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return
	}
	g.writers.note(g.m.Reg.Resolve(int(c.Pid)))
}

var (
	_ gofs.FileReader    = (*guardedFile)(nil)
	_ gofs.FileWriter    = (*guardedFile)(nil)
	_ gofs.FileFlusher   = (*guardedFile)(nil)
	_ gofs.FileReleaser  = (*guardedFile)(nil)
	_ gofs.FileFsyncer   = (*guardedFile)(nil)
	_ gofs.FileGetattrer = (*guardedFile)(nil)
	_ gofs.FileSetattrer = (*guardedFile)(nil)
	_ gofs.FileAllocater = (*guardedFile)(nil)
	_ gofs.FileLseeker   = (*guardedFile)(nil)
)

// openGuarded prepares a staging copy of the file at rel (empty when
// truncating) and returns the handle.
func (m *Monitor) openGuarded(n *Node, res *principal.Resolved, rel string, flags uint32) (*guardedFile, syscall.Errno) {
	var src *os.File
	var size int64
	if flags&syscall.O_TRUNC == 0 {
		var err error
		if src, err = m.openFileRel(rel, unix.O_RDONLY); err == nil {
			defer src.Close()
			if fi, err := src.Stat(); err == nil {
				size = fi.Size()
			}
		} else if !os.IsNotExist(err) {
			return nil, gofs.ToErrno(err)
		}
	}
	f, onDisk, err := m.stagingFor(size)
	if err != nil {
		m.log.Error().Err(err).Msg("cannot create staging file")
		return nil, syscall.EIO
	}
	if src != nil {
		if _, err := io.Copy(f, src); err != nil {
			f.Close()
			return nil, gofs.ToErrno(err)
		}
	}
	g := &guardedFile{m: m, node: n, res: res, staging: f, onDisk: onDisk,
		append: flags&syscall.O_APPEND != 0, truncated: flags&syscall.O_TRUNC != 0,
		appendOnly: flags&syscall.O_TRUNC == 0}
	if fi, err := f.Stat(); err == nil {
		g.baseLen = fi.Size()
	}
	g.writers.note(res)
	return g, 0
}

// stagingFor returns a staging file for content of the given size: in
// memory up to stagingInMemory, on disk past it.
func (m *Monitor) stagingFor(size int64) (*os.File, bool, error) {
	if size > stagingInMemory {
		f, err := m.diskStaging()
		return f, true, err
	}
	return m.newStaging()
}

// stagingInMemory is the size up to which staged content stays in memory.
// Guarded files are memory, identity and configuration files, kilobytes in
// practice; past this a handle's staging moves to the state directory.
const stagingInMemory = 16 << 20

// newStaging returns an unnamed file for staged content (nothing to clean
// up after a crash). It lives in memory (memfd): a staged copy then costs
// no inode allocation and no unlink in the state directory's filesystem,
// which on ext4 are a good part of a small commit. Where memfd is not
// available it is a file in the state directory.
func (m *Monitor) newStaging() (f *os.File, onDisk bool, err error) {
	if fd, err := unix.MemfdCreate("aerfs-stage", unix.MFD_CLOEXEC); err == nil {
		return os.NewFile(uintptr(fd), "aerfs-stage"), false, nil
	}
	f, err = m.diskStaging()
	return f, true, err
}

func (m *Monitor) diskStaging() (*os.File, error) {
	f, err := os.CreateTemp(m.stagingDir(), "stage-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// room moves the staging to disk before it grows past stagingInMemory, so
// that a large write costs disk, not the daemon's memory. Called with g.mu
// held.
func (g *guardedFile) room(end int64) error {
	if g.onDisk || end <= stagingInMemory {
		return nil
	}
	f, err := g.m.diskStaging()
	if err != nil {
		return err
	}
	pos, err := g.staging.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = io.Copy(f, io.NewSectionReader(g.staging, 0, 1<<62))
	}
	if err == nil {
		_, err = f.Seek(pos, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return err
	}
	g.staging.Close()
	g.staging, g.onDisk = f, true
	return nil
}

// openFileRel opens a backing file by relative path without following
// symlinks anywhere on the way.
func (m *Monitor) openFileRel(rel string, flags int) (*os.File, error) {
	dfd, name, done, err := m.parentAt(rel)
	if err != nil {
		return nil, err
	}
	defer done()
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

func (g *guardedFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if pageFill(ctx) {
		// A map's page: never the staged content (pagefill.go).
		return g.readCommitted(dest, off)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n, err := g.staging.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		return nil, gofs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (g *guardedFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, err := g.staging.Stat()
	if err != nil {
		return 0, gofs.ToErrno(err)
	}
	if g.append {
		off = st.Size()
	} else if off != st.Size() {
		g.appendOnly = false
	}
	g.noteWriter(ctx)
	if err := g.room(off + int64(len(data))); err != nil {
		return 0, gofs.ToErrno(err)
	}
	n, err := g.staging.WriteAt(data, off)
	g.dirty = true
	return uint32(n), gofs.ToErrno(err)
}

func (g *guardedFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, err := unix.Seek(int(g.staging.Fd()), int64(off), int(whence))
	return uint64(n), gofs.ToErrno(err)
}

func (g *guardedFile) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.noteWriter(ctx)
	if err := g.room(int64(off + size)); err != nil {
		return gofs.ToErrno(err)
	}
	g.dirty, g.appendOnly = true, false
	return gofs.ToErrno(unix.Fallocate(int(g.staging.Fd()), mode, int64(off), int64(size)))
}

func (g *guardedFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	st, err := g.m.lstatRel(g.node.rel())
	if err != nil {
		return gofs.ToErrno(err)
	}
	g.mu.Lock()
	fi, ferr := g.staging.Stat()
	g.mu.Unlock()
	out.FromStat(st)
	if ferr == nil {
		out.Size = uint64(fi.Size())
		out.Blocks = (out.Size + 511) / 512
	}
	return 0
}

// Setattr through the handle (ftruncate, fchmod …). Only the size is
// staged; mode, owner and times are decided as OpSetattr by the node.
func (g *guardedFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		g.mu.Lock()
		g.noteWriter(ctx)
		if fi, err := g.staging.Stat(); err != nil || fi.Size() != int64(sz) {
			g.appendOnly = false
		}
		err := g.room(int64(sz))
		if err == nil {
			err = g.staging.Truncate(int64(sz))
		}
		g.dirty = true
		g.mu.Unlock()
		if err != nil {
			return gofs.ToErrno(err)
		}
	}
	return g.Getattr(ctx, out)
}

func (g *guardedFile) Flush(ctx context.Context) syscall.Errno { return g.commit(ctx, false) }

func (g *guardedFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return g.commit(ctx, false)
}

func (g *guardedFile) Release(ctx context.Context) syscall.Errno {
	errno := g.commit(ctx, true)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.created && !g.closed {
		g.dropPlaceholder()
	}
	if !g.closed {
		g.closed = true
		g.staging.Close()
		g.m.writeClosedKey(g.key)
	}
	return errno
}

// dropPlaceholder removes the empty file this handle created when nothing
// it staged was ever committed (its writes or its commit were refused):
// the log never recorded the name, so it is absent again. Only that very
// placeholder goes: not a file another commit has put there since. Called
// with g.mu held.
func (g *guardedFile) dropPlaceholder() {
	rel := g.node.rel()
	defer g.m.lockPath(rel)()
	st, err := g.m.lstatRel(rel)
	if err != nil || keyOf(st) != g.key || st.Size != 0 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	if err := g.m.unlinkRel(rel, 0); err != nil {
		g.m.log.Warn().Err(err).Str("path", rel).Msg("cannot remove the empty file a refused create left")
		return
	}
	g.created = false
}

// commit decides again for every process that wrote through the handle,
// each resolved as it is now (it may have read something, joined a
// session or exec'd since), and either replaces the backing file with the
// staged content or quarantines it. Commits of one path are serialised.
func (g *guardedFile) commit(ctx context.Context, last bool) syscall.Errno {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || !g.dirty && !(last && g.truncated) {
		return 0
	}
	g.dirty, g.truncated = false, false
	start := time.Now()
	rel := g.node.rel()
	defer g.m.lockPath(rel)()
	subjects := g.m.writersNow(&g.writers)
	if len(subjects) == 0 {
		subjects = []*principal.Resolved{g.res}
	}
	staged := g.staging
	created := g.created
	if g.appendOnly || g.append && g.created {
		// An O_APPEND handle that created the file appended to nothing.
		f, err := g.m.rebase(rel, g.staging, g.baseLen)
		if err != nil {
			g.m.log.Error().Err(err).Str("path", rel).Msg("cannot rebase appended content")
			return syscall.EIO
		}
		staged = f
	}
	if created {
		// The empty placeholder this handle created is not a previous
		// version, unless another commit has replaced it since.
		if st, err := g.m.lstatRel(rel); err != nil || keyOf(st) != g.key || st.Size != 0 {
			created = false
		}
	}
	errno := g.m.commitAll(ctx, subjects, rel, staged, created)
	if staged != g.staging {
		if errno != 0 {
			staged.Close()
		} else {
			// The handle now holds what it committed; later appends are
			// relative to that.
			g.staging.Close()
			g.staging = staged
			if fi, err := staged.Stat(); err == nil && fi.Size() > stagingInMemory {
				g.onDisk = true
			}
		}
	}
	if errno == 0 {
		if g.m.OnCommit != nil {
			g.m.OnCommit(time.Since(start))
		}
		g.created = false
		g.appendOnly = true
		if fi, err := g.staging.Stat(); err == nil {
			g.baseLen = fi.Size()
		}
	}
	return errno
}

// commitAll decides the commit for every subject (the first is the one it
// is recorded under) and commits or quarantines. Called with rel's lock
// held.
func (m *Monitor) commitAll(ctx context.Context, subjects []*principal.Resolved, rel string, staged *os.File, created bool) syscall.Errno {
	for _, w := range subjects[1:] {
		// Every process that wrote through the handle must be allowed to
		// write the file: a descriptor handed to a WEB process does not
		// carry its opener's authority.
		if errno := m.commitCheck(w, rel, staged, created); errno != 0 {
			return errno
		}
	}
	return m.commitAs(ctx, subjects[0], rel, staged, created, subjects[1:]...)
}

// commitCheck decides the commit for one writer and quarantines the staged
// content when refused.
func (m *Monitor) commitCheck(res *principal.Resolved, rel string, staged *os.File, created bool) syscall.Errno {
	st, _ := m.lstatRel(rel)
	t, _ := m.target(rel, st)
	t.Absent = t.Absent || created // only this handle's empty placeholder is there
	subj := res.Subject()
	v := m.decideCommit(res, subj, t)
	if v.Allow {
		return 0
	}
	return m.quarantine(res, subj, rel, staged, v, t.Absent)
}

// quarantine keeps refused content as a blob and records the refusal.
// absent: the file is not there for the log (at most the committing
// handle's empty placeholder is, which goes at its release).
func (m *Monitor) quarantine(res *principal.Resolved, subj policy.Subject, rel string, staged *os.File, v policy.Verdict, absent bool) syscall.Errno {
	newHash, err := m.rec.PutBlobFile(fdPath(staged))
	if err != nil {
		m.log.Error().Err(err).Msg("cannot store staged content")
		return syscall.EIO
	}
	r := m.verdictRecord(res, subj, policy.OpWrite, rel, v)
	if v.Rule != policy.RuleReview {
		m.noteDenial(res)
	}
	return m.keepInQuarantine(r, rel, newHash, absent)
}

// decideCommit is the decision at commit (see gateCommit).
func (m *Monitor) decideCommit(res *principal.Resolved, subj policy.Subject, t policy.Target) policy.Verdict {
	return m.gateCommit(res, subj, t)
}

// keepInQuarantine records refused content with the hash of the file it
// would have replaced, so that an approval can check nothing changed since.
func (m *Monitor) keepInQuarantine(r *evidence.Record, rel, newHash string, absent bool) syscall.Errno {
	base := ""
	if _, err := m.lstatRel(rel); err == nil && !absent {
		h, err := m.putBlobRel(rel)
		if err != nil {
			return syscall.EIO
		}
		base = h
	}
	m.Stats.Denied.Add(1)
	m.Stats.Quarantined.Add(1)
	r.Type = evidence.TypeQuarantine
	r.Meta.Op = "commit"
	r.Meta.Verdict = "deny"
	r.Payload = &evidence.Payload{OldHash: base, NewHash: newHash, Detail: "quarantined"}
	if _, err := m.mustRecord(r); err != nil {
		return syscall.EIO
	}
	m.log.Info().Str("path", rel).Str("rule", r.Meta.Rule).Str("blob", newHash).Msg("content kept in quarantine")
	return syscall.EACCES
}

// commitFrom is the one place where guarded content changes: decide, keep
// the previous version, replace atomically, record durably.
func (m *Monitor) commitFrom(ctx context.Context, res *principal.Resolved, rel string, staged *os.File) syscall.Errno {
	defer m.lockPath(rel)()
	return m.commitAs(ctx, res, rel, staged, false)
}

// commitAs is commitFrom for a file that the committing handle itself
// created (created): the empty placeholder is not a previous version.
// others are further writers, allowed already: the new content's label
// carries their taint too. Called with rel's lock held.
func (m *Monitor) commitAs(ctx context.Context, res *principal.Resolved, rel string, staged *os.File, created bool, others ...*principal.Resolved) syscall.Errno {
	st, _ := m.lstatRel(rel)
	t, _ := m.target(rel, st)
	t.Absent = t.Absent || created // only this handle's empty placeholder is there
	subj := res.Subject()
	for _, o := range others {
		w := o.Subject()
		subj.Taint |= w.Taint
		subj.Principal = policy.Lower(subj.Principal, w.Principal)
	}
	v := m.decideCommit(res, subj, t)
	if !v.Allow {
		return m.quarantine(res, subj, rel, staged, v, t.Absent)
	}
	newHash, err := hashReader(staged)
	if err != nil {
		return syscall.EIO
	}
	m.stampCommit(res, rel, newHash)
	if errno, held := m.quarantineBelowAct(res, subj, rel, t, staged, newHash); held {
		return errno
	}
	var rep *replacement
	var preKey *fileKey
	// The replacement next to the file is staged while the blob is stored
	// and the record made durable: publication waits for both. A staging
	// that fails after the record is durable fails the publication, which
	// the transaction records as not applied.
	type staging struct {
		rep   *replacement
		errno syscall.Errno
	}
	var stagec chan staging
	waitStage := func() syscall.Errno {
		if stagec == nil {
			return 0
		}
		r := <-stagec
		stagec = nil
		rep = r.rep
		return r.errno
	}
	return m.apply(&txn{
		keep: []string{rel},
		after: func(map[string]string) map[string]string {
			return map[string]string{rel: newHash}
		},
		prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
			if created {
				// This handle's empty placeholder is no version: the
				// record and, should the change not be applied, the
				// not-applied record say the file was absent.
				old[rel] = ""
			}
			oldHash := old[rel]
			stagec = make(chan staging, 1)
			go func() {
				r, errno := m.stageReplacement(rel, staged, st)
				stagec <- staging{r, errno}
			}()
			h, err := m.rec.PutBlobFile(fdPath(staged))
			if err == nil && h != newHash {
				err = fmt.Errorf("staged content changed while it was stored (%.12s, then %.12s)", newHash, h)
			}
			if err != nil {
				m.log.Error().Err(err).Str("path", rel).Msg("cannot store staged content")
				return nil, syscall.EIO
			}
			return []*evidence.Record{m.writeRecord(res, subj, rel, oldHash, newHash, v)}, 0
		},
		publish: func(ids []string) syscall.Errno {
			if errno := waitStage(); errno != 0 {
				return errno
			}
			if pl := labelForWriter(subj); pl != nil && rep.st != nil {
				// A labelled version is labelled before anyone can open
				// it: a reader between the rename and bindWrite inherits
				// its taint (the rename changes its ctime; the label's
				// hash still binds it).
				pl.Hash, pl.Record = newHash, ids[0]
				pl.Stamp = m.pendingStamp(rel, newHash, false)
				pl.bindFingerprint(rep.st)
				k := keyOf(rep.st)
				if err := m.Labels.Set(k, pl); err != nil {
					m.log.Error().Err(err).Str("path", rel).Msg("label of the new version not stored")
					return syscall.EIO
				}
				preKey = &k
			}
			if errno := rep.publish(); errno != 0 {
				if preKey != nil {
					// The temporary file is gone; its inode number is free.
					m.Labels.Set(*preKey, nil)
				}
				return errno
			}
			rep.close()
			return 0
		},
		done: func(ids []string) syscall.Errno {
			m.Stats.Committed.Add(1)
			nst, _ := m.lstatRel(rel)
			return m.bindWrite(subj, rel, newHash, ids[0], nst)
		},
		abort: func() {
			waitStage()
			if rep != nil {
				rep.abort()
			}
		},
	})
}

// writeRecord is the record of a write of rel from oldHash to newHash.
func (m *Monitor) writeRecord(res *principal.Resolved, subj policy.Subject, rel, oldHash, newHash string, v policy.Verdict) *evidence.Record {
	return &evidence.Record{
		Type: evidence.TypeWrite, Principal: subj.Principal.String(), Taint: taintNames(subj.Taint),
		Parents: m.parentsFor(res, rel),
		Meta: evidence.Meta{Path: rel, Op: "commit", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Session: subj.Session, Rule: v.Rule.ID(), Reason: v.Rule.Reason(),
			Class: m.recordClass(subj, rel, newHash)},
		Payload: &evidence.Payload{OldHash: oldHash, NewHash: newHash},
	}
}

// bindWrite points the path at its new version's record and binds the
// file's label to the new content.
func (m *Monitor) bindWrite(subj policy.Subject, rel, newHash, id string, nst *syscall.Stat_t) syscall.Errno {
	m.mu.Lock()
	m.lastRec[rel] = id
	if nst != nil {
		m.guarded[keyOf(nst)] = rel
	}
	m.mu.Unlock()
	if nst != nil {
		l := labelForWriter(subj)
		if l == nil {
			l = &Label{Origin: subj.Principal}
		}
		l.Hash, l.Record = newHash, id
		l.Stamp = m.pendingStamp(rel, newHash, true)
		l.bindFingerprint(nst)
		if err := m.Labels.Set(keyOf(nst), l); err != nil {
			return syscall.EIO
		}
	}
	return 0
}

// rewriteInPlace gives the existing inode the staged content.
func (m *Monitor) rewriteInPlace(dfd int, name, rel string, staged *os.File) syscall.Errno {
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return gofs.ToErrno(err)
	}
	out := os.NewFile(uintptr(fd), rel)
	defer out.Close()
	if _, err := staged.Seek(0, io.SeekStart); err != nil {
		return gofs.ToErrno(err)
	}
	n, err := io.Copy(out, staged)
	if err != nil {
		return gofs.ToErrno(err)
	}
	if err := out.Truncate(n); err != nil {
		return gofs.ToErrno(err)
	}
	return gofs.ToErrno(out.Sync())
}

// copyXattrs gives the new file (fd) the extended attributes of the file
// it replaces (name in dfd): a commit changes content, not attributes.
func copyXattrs(dfd int, name string, fd int) {
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

func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashReader hashes f from its start with pread, leaving its offset alone.
func hashReader(f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
