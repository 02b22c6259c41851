// Package fs is the FUSE side of aerfs: a loopback over the backing
// directory in which every operation family passes one choke point, the
// Monitor's gate, before anything reaches the backing directory.
//
// # Invariants
//
//   - Every mutation of a guarded path (identity, memory, control) is decided
//     by policy.Decide from the caller's principal and taint, at open time and
//     again at commit, and the verdict is recorded. Nothing is authorised from
//     inside Write: writes to guarded files land in a staging file bound to
//     the handle, and only a commit replaces the backing file, atomically.
//   - Guarded files are never served with kernel passthrough, never through
//     the page cache (direct_io), never with cached attributes or entries:
//     every byte and every lookup reaches the daemon.
//   - Session namespaces are never served from the kernel's dentry cache: an
//     entry looked up by one session must not be reused by another.
//   - A caller that cannot be identified is refused every guarded mutation.
//   - Refused content is never lost: it is kept as a quarantined blob.
//
// # Threat
//
// An agent (or anything it runs) that was steered by content it read tries
// to rewrite its own long-term memory or configuration, by any file
// operation it can find: write, truncate, rename over, link, symlink,
// xattr, chmod, mmap, copy_file_range.
package fs

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Recorder is where verdicts, writes and content go. The evidence log
// implements it.
type Recorder interface {
	Append(r *evidence.Record) (string, error)
	// AppendAll makes every record durable in one batch, or none.
	AppendAll(rs ...*evidence.Record) ([]string, error)
	PutBlob(data []byte) (string, error)
	PutBlobFile(path string) (string, error)
	Blob(hash string) ([]byte, error)
	AppendAsync(r *evidence.Record, onErr func(error)) (string, error)
	HasBlob(hash string) bool
	Flush() error
}

// FlushLog makes every record queued so far durable and visible to readers.
func (m *Monitor) FlushLog() error { return m.rec.Flush() }

// reservedPrefix names aerfs's own temporary files in the backing
// directory during a commit; they cannot be looked up or created through
// the mount.
const reservedPrefix = ".aerfs-commit-"

// Monitor holds everything the FUSE nodes share.
type Monitor struct {
	rootFd   int    // the backing directory, opened before the mount covered it
	rootPath string // /proc/self/fd/<rootFd>, for path-based calls
	stateDir string
	pol      atomic.Pointer[policy.Policy]
	Reg      *principal.Registry
	Labels   *LabelStore
	rec      Recorder
	log      zerolog.Logger
	root     string              // Config.Root
	roots    map[string]*Monitor // further roots by name (roots.go)

	mu        sync.Mutex
	guarded   map[fileKey]string  // inodes of guarded files, so a hard link is guarded too
	lastRec   map[string]string   // path → id of the record of its current version
	rt        readTracker         // what each session (or process) read: fs/reads.go
	objs      objectLookers       // who looked up each FIFO, socket and device node
	writers   map[fileKey]int     // inodes open for writing through the mount
	expected  map[string]string   // guarded path → content aerfs last gave it ("" = absent)
	inflight  map[string]int      // guarded paths aerfs is changing right now
	unflushed map[string]struct{} // guarded paths changed since the last SyncBacking
	onKnown   func(rel string)    // see SetOnKnown
	paths     pathLocks           // one lock per guarded path being changed

	Stats Stats

	// OnCommit, when set, is told how long each guarded commit took, from
	// the close that asked for it to its durable record and publication
	// (the metrics' histogram).
	OnCommit func(time.Duration)

	// OnBurst is called (once, in its own goroutine) when a session is
	// quarantined after a burst of refusals.
	OnBurst func(s *principal.Session)
	burst   map[string][]time.Time // session → times of its recent refusals
	anyHeld atomic.Bool            // some session is quarantined: plain fast paths must look
	authst  authState              // authority monitor (fs/authority.go)
}

// Stats counts verdicts for `aerfs status`.
type Stats struct {
	Allowed, Denied, Committed, Quarantined atomic.Int64
}

// Config is what NewMonitor needs.
type Config struct {
	RootFd   int
	StateDir string
	Policy   *policy.Policy
	Registry *principal.Registry
	Labels   *LabelStore
	Recorder Recorder
	Log      zerolog.Logger
	// Root names a further root of the policy: the paths of its records
	// are "@Root/…" (roots.go).
	Root string
}

// NewMonitor prepares the monitor and indexes the guarded files already in
// the backing directory.
func NewMonitor(c Config) (*Monitor, error) {
	m := &Monitor{
		rootFd:   c.RootFd,
		rootPath: fmt.Sprintf("/proc/self/fd/%d", c.RootFd),
		stateDir: c.StateDir,
		Reg:      c.Registry,
		Labels:   c.Labels,
		rec:      c.Recorder,
		log:      c.Log,
		guarded:  map[fileKey]string{},
		lastRec:  map[string]string{},
		root:     c.Root,
	}
	m.pol.Store(c.Policy)
	if err := os.MkdirAll(m.stagingDir(), 0o700); err != nil {
		return nil, err
	}
	if err := m.indexGuarded(); err != nil {
		return nil, err
	}
	return m, nil
}

// Policy is the policy in force.
func (m *Monitor) Policy() *policy.Policy { return m.pol.Load() }

// SetPolicy replaces the policy in force.
func (m *Monitor) SetPolicy(p *policy.Policy) { m.pol.Store(p); m.rootsPolicy(p) }

func (m *Monitor) stagingDir() string { return path.Join(m.stateDir, "staging") }

// indexGuarded walks the backing directory once at mount and remembers the
// inode of every file whose path is not plain, so that a hard link made
// before the mount (or a link under a plain name) is still guarded.
func (m *Monitor) indexGuarded() error {
	pol := m.Policy()
	var walk func(dirRel string) error
	walk = func(dirRel string) error {
		fd, err := m.openDir(dirRel)
		if err != nil {
			return nil
		}
		f := os.NewFile(uintptr(fd), dirRel)
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil {
			return nil
		}
		for _, name := range names {
			rel := joinRel(dirRel, name)
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue
			}
			if isCommitTemp(name) && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
				// The temporary file of a commit a crash interrupted:
				// either its rename happened (and this is not it) or the
				// write is completed from its blob at mount.
				unix.Unlinkat(fd, name, 0)
				continue
			}
			switch st.Mode & syscall.S_IFMT {
			case syscall.S_IFDIR:
				if err := walk(rel); err != nil {
					return err
				}
			case syscall.S_IFREG:
				if c, _, _ := pol.Classify(rel); c != policy.Plain {
					m.guarded[fileKey{Dev: st.Dev, Ino: st.Ino}] = rel
				}
			}
		}
		return nil
	}
	return walk("")
}

// isCommitTemp reports whether name is exactly the name replaceThen gives
// its temporary file: the reserved prefix, a time and a pid.
func isCommitTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, reservedPrefix)
	if !ok {
		return false
	}
	t, pid, ok := strings.Cut(rest, "-")
	return ok && allDigits(t) && allDigits(pid)
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// openDir opens a directory of the backing tree by its workspace-relative
// path without following any symlink and without leaving the tree.
func (m *Monitor) openDir(rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	if long(rel) {
		return m.openDirPieces(rel, unix.O_RDONLY)
	}
	return unix.Openat2(m.rootFd, rel, &unix.OpenHow{
		Flags:   unix.O_DIRECTORY | unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// lstatRel stats a backing path without following a final symlink. The
// path of a node never crosses a symlink: the kernel resolves symlinks
// itself, so a node's parents are real directories of the backing tree.
func (m *Monitor) lstatRel(rel string) (*syscall.Stat_t, error) {
	if rel == "" {
		rel = "."
	}
	fd, name, done, err := m.parentAt(rel)
	if err != nil {
		return nil, err
	}
	defer done()
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return (*syscall.Stat_t)(unsafe.Pointer(&st)), nil
}

// caller resolves the process behind a request.
func (m *Monitor) caller(ctx context.Context) *principal.Resolved {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return &principal.Resolved{Reason: "request without caller"}
	}
	return m.Reg.Resolve(int(c.Pid))
}

// effectiveLabel returns the label a reader inherits from the file with
// stat st, checking its binding. A label whose binding broke is EXTERNAL.
func (m *Monitor) effectiveLabel(st *syscall.Stat_t, rel string) *Label {
	if st == nil {
		return nil
	}
	k := keyOf(st)
	l := m.Labels.Get(k)
	if l == nil {
		return nil
	}
	if l.Kind != 0 {
		if l.Kind == st.Mode&syscall.S_IFMT {
			return l // a special object's label (fs/objects.go)
		}
		m.Labels.Set(k, nil)
		return nil
	}
	if l.fingerprintMatches(st) || m.openForWrite(k) {
		return l
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		// Labels are for regular files: this one belongs to an earlier
		// file whose inode number was reused. Never open a FIFO or a
		// device to hash it.
		m.Labels.Set(k, nil)
		return nil
	}
	if l.Hash != "" {
		if h, err := m.hashRel(rel); err == nil && h == l.Hash {
			l.bindFingerprint(st)
			_ = m.Labels.Set(k, l)
			return l
		}
	}
	if m.paths.busy(rel) {
		return l // a commit of rel is publishing a version: the stat raced it
	}
	m.log.Warn().Str("path", rel).Msg("label binding broken: content changed outside the mount; treated as EXTERNAL")
	m.record(&evidence.Record{Type: evidence.TypeVerdict, Principal: policy.External.String(),
		Meta: evidence.Meta{Path: rel, Op: "drift", Verdict: "allow", Rule: "drift",
			Reason: "content no longer matches its label: treated as EXTERNAL"}})
	return &Label{Origin: policy.External, Taint: l.Taint | policy.Untrusted, Record: l.Record}
}

// target classifies rel and attaches the label of the file with stat st.
func (m *Monitor) target(rel string, st *syscall.Stat_t) (policy.Target, *Label) {
	pol := m.Policy()
	c, ns, sess := pol.Classify(rel)
	t := policy.Target{Class: c, Namespace: ns, Session: sess, Absent: st == nil}
	if st != nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && c == policy.Plain && st.Nlink > 1 {
		// A hard link shares its content with a guarded name.
		m.mu.Lock()
		g, ok := m.guarded[keyOf(st)]
		m.mu.Unlock()
		if ok {
			t.Class, _, _ = pol.Classify(g)
		}
	}
	l := m.effectiveLabel(st, rel)
	if l != nil {
		t.LabelTaint = l.Taint
		if !l.Origin.Trusted() {
			t.LabelTaint |= policy.OriginTaint(l.Origin)
		}
	}
	return t, l
}

func (m *Monitor) verdictRecord(res *principal.Resolved, subj policy.Subject, op policy.Op, rel string, v policy.Verdict) *evidence.Record {
	verdict := "deny"
	if v.Allow {
		verdict = "allow"
	}
	r := &evidence.Record{
		Type:      evidence.TypeVerdict,
		Principal: subj.Principal.String(),
		Taint:     taintNames(subj.Taint),
		Meta: evidence.Meta{
			Path: rel, Op: opName(op), Verdict: verdict,
			Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Rule: v.Rule.ID(), Reason: v.Rule.Reason(),
		},
	}
	if !res.Identified {
		// An unidentified caller is the least trusted principal; the
		// reason says why it could not be identified.
		r.Principal = policy.External.String()
		r.Meta.Reason += ": unidentified caller: " + res.Reason
	}
	return r
}

func taintNames(t policy.Taint) []string {
	n := t.Names()
	if n == nil {
		return []string{}
	}
	return n
}

// record queues r for the next group commit without waiting for it to be
// durable: verdicts and taint notes, which must not add a disk flush to the
// syscall that caused them. Changes to guarded files use mustRecord.
func (m *Monitor) record(r *evidence.Record) string {
	m.fillRecord(r)
	id, err := m.rec.AppendAsync(r, func(err error) {
		m.log.Error().Err(err).Str("type", r.Type).Msg("evidence append failed")
	})
	if err != nil {
		m.log.Error().Err(err).Str("type", r.Type).Msg("evidence append failed")
	}
	return id
}

func (m *Monitor) fillRecord(r *evidence.Record) {
	if r.Parents == nil {
		r.Parents = []string{}
	}
	if r.Taint == nil {
		r.Taint = []string{}
	}
	if r.Meta.Time == "" {
		r.Meta.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	if m.root != "" {
		m.rootPaths(r)
	}
}

// mustRecord appends r and returns once it is durable.
func (m *Monitor) mustRecord(r *evidence.Record) (string, error) {
	m.fillRecord(r)
	return m.rec.Append(r)
}

// Record appends a record from outside the FUSE layer (the control socket).
func (m *Monitor) Record(r *evidence.Record) (string, error) { return m.mustRecord(r) }

func (m *Monitor) noteTaint(res *principal.Resolved, added policy.Taint, rel string) {
	subj := res.Subject()
	m.record(&evidence.Record{Type: evidence.TypeTaint, Principal: subj.Principal.String(), Taint: taintNames(added),
		Meta: evidence.Meta{Path: rel, Op: "read", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Reason: "read a labelled file"}})
}

// readerKey names whose reads a change inherits: the caller's session, or
// the process itself outside sessions.
func readerKey(res *principal.Resolved) reader {
	if res.Session != nil {
		return reader{session: res.Session.ID}
	}
	return reader{proc: res.Proc.ID}
}

type reader struct {
	session string
	proc    principal.ProcID
}

// noteRead remembers that the caller's session read the file whose current
// version was recorded as id: a later write by that session names it as a
// parent, so provenance can be walked.
func (m *Monitor) noteRead(res *principal.Resolved, id string) {
	k := readerKey(res)
	t := &m.rt
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.set(k, res)
	for _, x := range rs.labelled {
		if x == id {
			return
		}
	}
	if len(rs.labelled) < maxLabelledParents {
		rs.labelled = append(rs.labelled, id)
	}
}

// maxLabelledParents leaves room under the evidence format's limit of 4096
// parents for the previous version and the reads record.
const maxLabelledParents = 4000

// parentsFor is the parents of a change of rel by the caller: the record of
// rel's current version, the records of the labelled files the caller read,
// and its newest reads record, which lists every file it read through the
// mount (written now for what it read since its last change: fs/reads.go),
// with those of the sessions its session was started from.
func (m *Monitor) parentsFor(res *principal.Resolved, rel string) []string {
	k := readerKey(res)
	reads := m.readsHeads(res)
	m.rt.mu.Lock()
	rs := m.rt.get(k, res)
	m.rt.mu.Unlock()
	out := []string{}
	m.mu.Lock()
	if id := m.lastRec[rel]; id != "" {
		out = append(out, id)
	}
	m.mu.Unlock()
	add := func(id string) {
		for _, x := range out {
			if x == id {
				return
			}
		}
		out = append(out, id)
	}
	if rs != nil {
		m.rt.mu.Lock()
		labelled := rs.labelled
		m.rt.mu.Unlock()
		for _, id := range labelled {
			add(id)
		}
	}
	for _, id := range reads {
		add(id)
	}
	return out
}

// labelForWriter is the label a file gets when the caller writes it.
// A clean USER or SYS writer leaves no label behind.
func labelForWriter(subj policy.Subject) *Label {
	if subj.Taint == 0 && subj.Principal.Trusted() {
		return nil
	}
	return &Label{Origin: subj.Principal, Taint: subj.Taint | policy.OriginTaint(subj.Principal), Session: subj.Session}
}

func mergeLabels(old, nw *Label) *Label {
	if old == nil {
		return nw
	}
	if nw == nil {
		c := *old
		return &c
	}
	c := *nw
	c.Taint |= old.Taint
	c.Origin = policy.Lower(old.Origin, nw.Origin)
	return &c
}

func opName(op policy.Op) string {
	switch op {
	case policy.OpLookup:
		return "lookup"
	case policy.OpRead:
		return "read"
	case policy.OpWrite:
		return "write"
	case policy.OpCreate:
		return "create"
	case policy.OpUnlink:
		return "unlink"
	case policy.OpRenameFrom:
		return "rename_from"
	case policy.OpRenameTo:
		return "rename_to"
	case policy.OpLink:
		return "link"
	case policy.OpSetattr:
		return "setattr"
	case policy.OpXattr:
		return "xattr"
	case policy.OpExec:
		return "exec"
	case policy.OpPromote:
		return "promote"
	}
	return "unknown"
}

func unsafePointer(st *unix.Stat_t) unsafe.Pointer { return unsafe.Pointer(st) }

// noteDenial counts a refused change against the root of the caller's
// session tree (the session the caller's sub-sessions were started from):
// refusals spread over nested sub-sessions add up. At the policy's burst
// threshold the root is quarantined, and with it the whole tree. Implicit
// sessions (processes outside sessions that read labelled content) are
// not counted.
func (m *Monitor) noteDenial(res *principal.Resolved) {
	if res == nil || res.Session == nil || res.Session.Implicit {
		return
	}
	root := res.Session.TreeRoot()
	n, window := m.Policy().Burst()
	now := time.Now()
	id := root.ID
	m.mu.Lock()
	if m.burst == nil {
		m.burst = map[string][]time.Time{}
	}
	ts := append(m.burst[id], now)
	for len(ts) > 0 && now.Sub(ts[0]) > window {
		ts = ts[1:]
	}
	m.burst[id] = ts
	hit := n > 0 && len(ts) >= n
	m.mu.Unlock()
	if hit && root.Quarantine() {
		m.anyHeld.Store(true)
		m.record(&evidence.Record{Type: evidence.TypeVerdict, Principal: root.Principal.String(), Taint: taintNames(root.Taint()),
			Meta: evidence.Meta{Session: id, Op: "burst", Verdict: "deny", Rule: policy.RuleBurst.ID(), UID: res.Proc.UID,
				Reason: fmt.Sprintf("%d refusals within %s in the session tree: session quarantined with its sub-sessions, its guarded changes are rolled back", len(ts), window)}})
		m.log.Warn().Str("session", id).Msg("burst of refusals: session quarantined")
		if m.OnBurst != nil {
			go m.OnBurst(root)
		}
	}
}

// hashRel hashes a regular backing file without following symlinks and
// without blocking on anything that is not a regular file.
func (m *Monitor) hashRel(rel string) (string, error) {
	f, err := m.openFileRel(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", rel)
	}
	return hashReader(f)
}
