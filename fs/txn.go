package fs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

// # The transaction
//
// Every change of a guarded path — a commit, a truncate, an unlink, a
// rename to, from or over one, a link onto one, a promotion, and the
// daemon's restores, approvals, rollbacks, drift repairs and completed
// writes — is carried out by apply, in one order:
//
//	decided (through the gate, by the caller)
//	→ the previous version of every path kept as a blob
//	→ the new content stored (prepare)
//	→ the records made durable, all of them in one batch or none
//	→ published (the rename, unlink or link in the backing directory)
//	→ labels and indexes updated (done)
//
// under the locks of every path it changes (lockPaths). A change whose
// records cannot be made durable does not happen: EIO, nothing published.
// A change whose records are durable but whose publication fails is
// recorded as not applied (a restore record back to the kept versions);
// one a crash interrupts between the two is completed at the next mount
// from the log. So no guarded file ever holds content the log has not
// recorded, and nothing the log recorded is lost.

// txn is one guarded change.
type txn struct {
	// keep are the paths whose current content the change needs: every
	// guarded path it changes (the previous version) and every source of
	// content that arrives at a guarded name. Each is kept as a blob
	// before anything else happens.
	keep []string
	// after says what each guarded path holds once the change is
	// published, given the kept contents: a content hash, or "" for
	// absent. Its keys are exactly the guarded paths the change touches.
	after func(old map[string]string) map[string]string
	// prepare stores the new content and stages what publish needs, given
	// the kept contents; it returns the change's records. It may set a
	// kept content to "" for a path it knows holds no version (a commit's
	// own empty placeholder): a change not applied then goes back to
	// absent.
	prepare func(old map[string]string) ([]*evidence.Record, syscall.Errno)
	// publish makes the change visible in the backing directory; ids are
	// the records' ids.
	publish func(ids []string) syscall.Errno
	// done updates labels and indexes once published.
	done func(ids []string) syscall.Errno
	// abort releases what prepare staged when the change does not happen.
	abort func()
}

// lockPaths takes the locks of every path (in one order, so that two
// changes of the same paths cannot deadlock) and returns the function that
// releases them.
func (m *Monitor) lockPaths(paths ...string) func() {
	ps := append([]string(nil), paths...)
	sort.Strings(ps)
	var unlocks []func()
	for i, p := range ps {
		if i > 0 && ps[i-1] == p {
			continue
		}
		unlocks = append(unlocks, m.lockPath(p))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// apply carries out t. Called with the locks of every path in t.keep
// and every key of t.after held (lockPaths).
func (m *Monitor) apply(t *txn) (errno syscall.Errno) {
	ok := false
	defer func() {
		if !ok && t.abort != nil {
			t.abort()
		}
	}()
	old := make(map[string]string, len(t.keep))
	for _, p := range t.keep {
		if _, done := old[p]; done {
			continue
		}
		h, errno := m.keepCurrent(p)
		if errno != 0 {
			return errno
		}
		old[p] = h
	}
	after := t.after(old)
	paths := make([]string, 0, len(after))
	for p := range after {
		paths = append(paths, p)
		defer m.changing(p)()
	}
	sort.Strings(paths)
	var recs []*evidence.Record
	if t.prepare != nil {
		if recs, errno = t.prepare(old); errno != 0 {
			return errno
		}
	}
	// The drift watcher sees the publication: say beforehand what the
	// names will hold.
	prev := make(map[string]string, len(paths))
	for _, p := range paths {
		prev[p], _ = m.Expected(p)
		m.expect(p, after[p])
	}
	unexpect := func() {
		for _, p := range paths {
			m.expect(p, prev[p])
		}
	}
	ids, err := m.appendAll(recs)
	if err != nil {
		m.log.Error().Err(err).Strs("paths", paths).Msg("guarded change refused: its record cannot be made durable")
		unexpect()
		return syscall.EIO
	}
	if errno := t.publish(ids); errno != 0 {
		unexpect()
		m.notApplied(paths, old, after, ids, errno)
		return errno
	}
	ok = true
	if t.done != nil {
		if errno := t.done(ids); errno != 0 {
			// The change is recorded and published: the caller must not
			// be told it failed (a writer whose close failed would take
			// its content for refused while every reader sees it). What
			// failed is bookkeeping after the fact (a label that could
			// not be stored on a full state directory).
			m.log.Error().Err(errno).Strs("paths", paths).Msg("guarded change published, but its labels or indexes could not be updated")
		}
	}
	return 0
}

// appendAll makes the records of one change durable together.
func (m *Monitor) appendAll(recs []*evidence.Record) ([]string, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	for _, r := range recs {
		m.fillRecord(r)
	}
	return m.rec.AppendAll(recs...)
}

// notApplied records that a change whose records are durable was refused
// by the backing filesystem: the paths are back at (still at) their kept
// versions.
func (m *Monitor) notApplied(paths []string, old, after map[string]string, ids []string, errno syscall.Errno) {
	if len(ids) == 0 {
		return
	}
	files := make([]evidence.FileState, 0, len(paths))
	for _, p := range paths {
		files = append(files, evidence.FileState{Path: p, OldHash: after[p], Hash: old[p]})
	}
	r := &evidence.Record{Type: evidence.TypeRestore, Principal: policy.Sys.String(), Parents: ids,
		Meta: evidence.Meta{Op: "not-applied", Verdict: "allow", UID: uint32(os.Getuid()), Pid: os.Getpid(),
			Reason: fmt.Sprintf("the change was recorded but the backing filesystem refused it (%v): not applied", errno)},
		Payload: &evidence.Payload{Detail: "not applied", Files: files}}
	// Until this record is durable the log says the paths hold what the
	// change would have given them, and the next mount would complete a
	// change whose caller was told it failed. The log heals by itself once
	// its cause is gone (a full state directory freed): keep trying, with
	// the paths still locked so that no later change is recorded before
	// this one, for up to notAppliedPatience.
	wait := 10 * time.Millisecond
	for deadline := time.Now().Add(notAppliedPatience); ; {
		_, err := m.mustRecord(r)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			m.log.Error().Err(err).Strs("paths", paths).Msg("a recorded change was not applied and the log cannot say so; the next mount completes it")
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// notAppliedPatience is how long a change that was recorded but could not
// be published waits for the log to accept the record that says so.
var notAppliedPatience = time.Minute

// keepCurrent keeps the current content of a guarded path as a blob and
// returns its hash: "" when the path is absent or not a regular file.
func (m *Monitor) keepCurrent(rel string) (string, syscall.Errno) {
	st, err := m.lstatRel(rel)
	if err != nil {
		if os.IsNotExist(err) {
			return "", 0
		}
		return "", gofs.ToErrno(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", 0
	}
	if l := m.Labels.Get(keyOf(st)); l != nil && l.Hash != "" && l.fingerprintMatches(st) && m.rec.HasBlob(l.Hash) {
		// Stored already: it was the new content of the last commit.
		return l.Hash, 0
	}
	return m.keepVersion(rel)
}

// replacement is new content staged next to a guarded file: written and
// being flushed to a temporary name in the same directory, published by a
// rename. A file with several names is rewritten in place instead.
type replacement struct {
	m       *Monitor
	rel     string
	dfd     int
	name    string
	tmp     string
	out     *os.File
	old     *syscall.Stat_t
	staged  *os.File
	st      *syscall.Stat_t // the temporary file's
	synced  chan error
	inPlace bool
	durable bool // flush the directory after the rename (no record covers it)
}

// stageReplacement writes staged to a temporary file next to rel (owner,
// mode and extended attributes of the file it replaces) and starts its
// flush.
func (m *Monitor) stageReplacement(rel string, staged *os.File, old *syscall.Stat_t) (*replacement, syscall.Errno) {
	dir, name := path.Split(rel)
	dfd, err := m.openDir(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	r := &replacement{m: m, rel: rel, dfd: dfd, name: name, old: old, staged: staged}
	if old != nil && old.Nlink > 1 {
		// The file has several names: a rename would split them. Write in
		// place at publication instead (still staged and decided first,
		// but not atomic against a crash mid-write).
		r.inPlace = true
		return r, 0
	}
	mode := uint32(0o644)
	if old != nil {
		mode = old.Mode & 0o7777
	}
	r.tmp = fmt.Sprintf("%s%d-%d", reservedPrefix, time.Now().UnixNano(), os.Getpid())
	fd, err := unix.Openat(dfd, r.tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, mode)
	if err != nil {
		unix.Close(dfd)
		return nil, gofs.ToErrno(err)
	}
	r.out = os.NewFile(uintptr(fd), r.tmp)
	fail := func(err error) (*replacement, syscall.Errno) {
		r.abort()
		return nil, gofs.ToErrno(err)
	}
	if _, err := staged.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	if _, err := io.Copy(r.out, staged); err != nil {
		return fail(err)
	}
	if old != nil {
		unix.Fchown(fd, int(old.Uid), int(old.Gid))
		unix.Fchmod(fd, mode)
		copyXattrs(dfd, name, fd)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err == nil {
		r.st = &st
	}
	// The content is written (a full disk has said so by now). It is not
	// flushed: the new content is durable as a blob with the record
	// before the rename publishes it, and a crash that loses what the
	// rename published is repaired at the next mount from the record (a
	// change recorded during a mount that crashed is completed unless the
	// file holds its content). A change without a record (durable) is
	// flushed before its rename.
	r.synced = make(chan error, 1)
	r.synced <- nil
	return r, 0
}

// publish waits for the temporary file's flush and renames it over the
// file (or rewrites a multiply linked file in place).
func (r *replacement) publish() syscall.Errno {
	if r.inPlace {
		return r.m.rewriteInPlace(r.dfd, r.name, r.rel, r.staged)
	}
	err := <-r.synced
	r.synced = nil
	if err == nil && r.durable {
		err = r.out.Sync()
	}
	if err != nil {
		return gofs.ToErrno(err)
	}
	prev := r.m.identityBefore(r.rel) // inoalias.go
	if err := unix.Renameat(r.dfd, r.tmp, r.dfd, r.name); err != nil {
		r.m.dropReplaced(prev)
		return gofs.ToErrno(err)
	}
	r.tmp = ""
	r.m.noteReplaced(prev, int(r.out.Fd())) // the kernel keeps the identity it knew
	if r.old != nil {
		// The replaced inode is gone: its label must not greet the next
		// file that gets its number.
		r.m.forgetInode(keyOf(r.old))
	}
	if r.durable {
		// Without a record the directory is the only durable trace.
		return gofs.ToErrno(unix.Fsync(r.dfd))
	}
	// With a record the directory is not flushed: a rename a crash loses
	// is completed at the next mount from the record and the stored blob.
	return 0
}

// abort removes the temporary file and closes what stageReplacement opened.
func (r *replacement) abort() {
	if r.synced != nil {
		<-r.synced
		r.synced = nil
	}
	r.close()
}

func (r *replacement) close() {
	if r.out != nil {
		r.out.Close()
		r.out = nil
	}
	if r.tmp != "" {
		unix.Unlinkat(r.dfd, r.tmp, 0)
		r.tmp = ""
	}
	if r.dfd >= 0 {
		unix.Close(r.dfd)
		r.dfd = -1
	}
}

// SyncBacking flushes what aerfs published since the last call: every
// guarded path it changed (renames of content not flushed on its own) and
// its directory are durable before the unmount is recorded, so a clean
// unmount record means nothing is left to complete. Only those: a syncfs
// of the whole backing file system waits for everything every other
// program wrote there (minutes behind a large copy on a busy disk).
func (m *Monitor) SyncBacking() error {
	m.mu.Lock()
	paths := m.unflushed
	m.unflushed = nil
	m.mu.Unlock()
	dirs := map[string]bool{}
	var first error
	for rel := range paths {
		dir, name := path.Split(rel)
		dir = strings.TrimSuffix(dir, "/")
		dfd, err := m.openDir(dir)
		for err != nil && dir != "" && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
			// The directory is gone, or something else stands at its
			// name (a session's symbolic link): nothing of aerfs's is
			// left in it, but its removal is an entry of the nearest
			// directory that remains.
			dir, name = path.Dir(dir), ""
			if dir == "." {
				dir = ""
			}
			dfd, err = m.openDir(dir)
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
