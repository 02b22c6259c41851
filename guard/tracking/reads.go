package tracking

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/principal"
)

// # Provenance from every source
//
// Each reader (a session, or a process outside sessions) keeps the set of
// files it opened for reading through the mount, labelled or not, each
// with the fingerprint of the version it had (device, inode, size, mtime,
// ctime: what the open's stat already gave). Nothing is hashed and nothing
// is written on the read path. When the reader changes something, Parents
// turns what it read since its last change into a reads record
// (docs/evidence-format.md §3.2), hashing each file then if it still has
// the fingerprint it was read with, and names the newest reads record as
// a parent: the reads records of one reader form a chain, so one parent
// covers everything it ever read.

const (
	// readsPendingMax is how many reads may wait for a change; more are
	// written as a reads record in the background.
	readsPendingMax = 4096
	// readsSeenMax bounds one reader's memory of what it already listed;
	// past it the memory starts again (a file may then be listed twice).
	readsSeenMax = 1 << 16
	// readsSeenTotal bounds that memory over all readers.
	readsSeenTotal = 1 << 20
	// readsSweepMin is the number of readers past which readers that were
	// processes that have exited are forgotten.
	readsSweepMin = 1024
	// readHashMax is the largest file hashed for a reads record;
	// readHashBudget and readHashTime bound the bytes hashed and the time
	// spent hashing when one change lists its reader's reads (a session
	// that read a whole repository does not hold its next commit for
	// seconds): past them, files are listed by fingerprint.
	readHashMax    = 4 << 20
	readHashBudget = 64 << 20
	readHashTime   = 50 * time.Millisecond
	// readsRecordEntries and readsRecordBytes keep a reads record well
	// under evidence.MaxRecordSize.
	readsRecordEntries = 4096
	readsRecordBytes   = 512 << 10
	// readHashCacheMax bounds the fingerprint → hash cache.
	readHashCacheMax = 1 << 16
	// maxLabelledParents leaves room under the evidence format's limit of
	// 4096 parents for the previous version and the reads record.
	maxLabelledParents = 4000
)

// fingerprint is the cheap identity of one version of a backing file.
type fingerprint struct {
	Dev, Ino           uint64
	Size, Mtime, Ctime int64
}

func fingerprintOf(st *syscall.Stat_t) fingerprint {
	return fingerprint{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

func (f fingerprint) String() string {
	return evidence.Fingerprint(f.Dev, f.Ino, f.Size, f.Mtime, f.Ctime)
}

type readEntry struct {
	rel  string
	fp   fingerprint
	hash string // known at the read (a label bound to this version), else computed when listed
}

type readSeenKey struct {
	rel string
	fp  fingerprint
}

// reader names whose reads a change inherits: the caller's session, or
// the process itself outside sessions.
type reader struct {
	session string
	proc    principal.ProcID
}

func readerOf(res *principal.Resolved) reader {
	if res.Session != nil {
		return reader{session: res.Session.ID}
	}
	return reader{proc: res.Proc.ID}
}

// readSet is one reader's.
type readSet struct {
	emit     sync.Mutex // held while its reads are being listed in a record
	proc     principal.ProcID
	isProc   bool // a process outside sessions (swept when it exits)
	seen     map[readSeenKey]struct{}
	pending  []readEntry
	labelled []string            // records of labelled files it read
	last     string              // newest reads record
	flushing bool                // a background listing is under way
	res      *principal.Resolved // a reader of the set, for the records' principal, pid and exe
	// wrote: for each plain file the reader wrote, the parents its last
	// write record named (Wrote).
	wrote map[string]string
}

// wroteMax bounds a reader's memory of the plain files it wrote; past it
// the memory starts again (a write may then be recorded twice).
const wroteMax = 4096

// Reads is what every reader read through the mount. Its own lock keeps
// the read path off every other.
type Reads struct {
	dir *backing.Dir
	led *ledger.Ledger

	mu      sync.Mutex
	sets    map[reader]*readSet
	seen    int // entries in every seen map
	sweepAt int
	hashMu  sync.Mutex
	hashes  map[fingerprint]string
	// taintRecords lists the records of what tainted a session other
	// than a file it read: every later change it makes is downstream of
	// them (SetTaintRecords).
	taintRecords func(session string) []string
	// lastReads finds a session's newest reads record (SetLastReads).
	lastReads func(session string) string
}

// NewReads follows reads of the backing directory dir, recording lists of
// them through led.
func NewReads(dir *backing.Dir, led *ledger.Ledger) *Reads {
	return &Reads{dir: dir, led: led, sets: map[reader]*readSet{}, sweepAt: readsSweepMin}
}

func (t *Reads) set(k reader, res *principal.Resolved) *readSet {
	rs := t.get(k, res)
	if rs == nil {
		if len(t.sets) >= t.sweepAt {
			t.sweepExited()
		}
		rs = &readSet{seen: map[readSeenKey]struct{}{}, res: res}
		if res.Session == nil {
			rs.proc, rs.isProc = res.Proc.ID, true
		} else if t.lastReads != nil {
			rs.last = t.lastReads(res.Session.ID) // a session back from retirement or a remount
		}
		t.sets[k] = rs
	}
	return rs
}

// get is the set of reader k, nil if it never read anything. An implicit
// session is made when a process outside sessions is tainted: what that
// process read before is its session's. Called with t.mu held.
func (t *Reads) get(k reader, res *principal.Resolved) *readSet {
	rs := t.sets[k]
	if s := res.Session; rs == nil && s != nil && s.Implicit {
		if old := t.sets[reader{proc: s.Root}]; old != nil {
			delete(t.sets, reader{proc: s.Root})
			old.isProc, old.res = false, res
			t.sets[k] = old
			rs = old
		}
	}
	return rs
}

// sweepExited forgets the readers that were processes outside sessions and
// have exited: nothing they read can be the parent of a later change.
// Called with t.mu held, which every open takes: whether they exited is
// read from /proc in the background, without it (a reader inside an exec
// does not answer until its FLUSH is: principal/procwait.go).
func (t *Reads) sweepExited() {
	procs := map[reader]principal.ProcID{}
	for k, rs := range t.sets {
		if rs.isProc {
			procs[k] = rs.proc
		}
	}
	t.sweepAt = max(readsSweepMin, 2*len(t.sets))
	go t.forgetExited(procs)
}

// forgetExited forgets the readers procs whose process has exited.
func (t *Reads) forgetExited(procs map[reader]principal.ProcID) {
	var gone []reader
	for k, id := range procs {
		if !principal.AliveOrSilent(id) {
			gone = append(gone, k)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range gone {
		if rs := t.sets[k]; rs != nil && rs.isProc && rs.proc == procs[k] {
			t.seen -= len(rs.seen)
			delete(t.sets, k)
		}
	}
	t.sweepAt = max(readsSweepMin, 2*len(t.sets))
}

// Labelled remembers that res's session read the file whose current
// version was recorded as id: a later change by that session names it as
// a parent, so provenance can be walked.
func (t *Reads) Labelled(res *principal.Resolved, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.set(readerOf(res), res)
	for _, x := range rs.labelled {
		if x == id {
			return
		}
	}
	if len(rs.labelled) < maxLabelledParents {
		rs.labelled = append(rs.labelled, id)
	}
}

// SetTaintRecords gives a way to find the records of what tainted a
// session other than a file it read (an exec of a web client, a web host
// through the proxy, a declaration): its later changes, and those of the
// sessions started from within it, name them as parents, so that aerfs
// scope and restore --contaminated-by of such a record reach what the
// session wrote after it.
func (t *Reads) SetTaintRecords(f func(session string) []string) {
	t.mu.Lock()
	t.taintRecords = f
	t.mu.Unlock()
}

// Opened notes that the identified res opened the regular file rel (stat
// st) for reading; hash is its content's hash when a label bound to this
// very version says it ("" otherwise).
func (t *Reads) Opened(res *principal.Resolved, rel string, st *syscall.Stat_t, hash string) {
	e := readEntry{rel: rel, fp: fingerprintOf(st), hash: hash}
	t.mu.Lock()
	rs := t.set(readerOf(res), res)
	sk := readSeenKey{rel, e.fp}
	if _, ok := rs.seen[sk]; ok {
		t.mu.Unlock()
		return
	}
	if len(rs.seen) >= readsSeenMax || t.seen >= readsSeenTotal {
		t.seen -= len(rs.seen)
		rs.seen = map[readSeenKey]struct{}{}
		if t.seen >= readsSeenTotal {
			for _, o := range t.sets {
				t.seen -= len(o.seen)
				o.seen = map[readSeenKey]struct{}{}
			}
		}
	}
	rs.seen[sk] = struct{}{}
	t.seen++
	rs.pending = append(rs.pending, e)
	spill := len(rs.pending) >= readsPendingMax && !rs.flushing
	who := rs.res
	if spill {
		rs.flushing = true
	}
	t.mu.Unlock()
	if spill {
		go func() {
			t.list(rs, who)
			t.mu.Lock()
			rs.flushing = false
			t.mu.Unlock()
		}()
	}
}

// Parents is the parents of a change by res of a path whose current
// version was recorded as last ("" when none): that record, the records
// of the labelled files res read, and its newest reads record, which lists
// every file it read through the mount (written now for what it read
// since its last change), with those of the sessions its session was
// started from.
func (t *Reads) Parents(res *principal.Resolved, last string) []string {
	reads := t.heads(res)
	out := []string{}
	if last != "" {
		out = append(out, last)
	}
	add := func(id string) {
		for _, x := range out {
			if x == id {
				return
			}
		}
		out = append(out, id)
	}
	t.mu.Lock()
	var labelled []string
	if rs := t.get(readerOf(res), res); rs != nil {
		labelled = rs.labelled
	}
	taints := t.taintRecords
	t.mu.Unlock()
	if taints != nil {
		for s := res.Session; s != nil; s = s.Parent() {
			labelled = append(labelled[:len(labelled):len(labelled)], taints(s.ID)...)
		}
	}
	for _, id := range labelled {
		add(id)
	}
	for _, id := range reads {
		add(id)
	}
	return out
}

// Wrote is the parents of a record of res's write of the plain file rel
// (last: the record of rel's current version, "" when none) when res, or
// a session it was started from, read anything through the mount that no
// record of its writes of rel named yet; nil otherwise. A plain file a
// clean writer wrote carries no label, so this record is what ties it to
// what its writer read: whoever reads the file later is downstream of
// those reads too (aerfs scope, restore --contaminated-by).
func (t *Reads) Wrote(res *principal.Resolved, rel, last string) []string {
	t.mu.Lock()
	read := false
	for k, s := readerOf(res), res.Session; ; {
		if rs := t.sets[k]; rs != nil && (len(rs.pending) > 0 || rs.last != "" || len(rs.labelled) > 0) {
			read = true
			break
		}
		if s == nil {
			break
		}
		if s = s.Parent(); s == nil {
			break
		}
		k = reader{session: s.ID}
	}
	t.mu.Unlock()
	if !read {
		return nil
	}
	ps := t.Parents(res, last)
	key := strings.Join(ps, ",")
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.set(readerOf(res), res)
	if rs.wrote[rel] == key {
		return nil
	}
	if rs.wrote == nil || len(rs.wrote) >= wroteMax {
		rs.wrote = map[string]string{}
	}
	rs.wrote[rel] = key
	return ps
}

// heads lists the newest reads records of res and of every session its
// session was started from (a session started from one that read a file
// is downstream of that file too; what the outer session read after it
// started is included, which can only widen a scope), listing first what
// each read since its last change.
func (t *Reads) heads(res *principal.Resolved) []string {
	var out []string
	add := func(k reader, who *principal.Resolved) {
		t.mu.Lock()
		rs := t.sets[k]
		if who != nil {
			rs = t.get(k, who)
		}
		if rs != nil && who == nil {
			who = rs.res
		}
		t.mu.Unlock()
		if rs == nil {
			return
		}
		if id := t.list(rs, who); id != "" {
			out = append(out, id)
		}
	}
	add(readerOf(res), res)
	if res.Session != nil {
		for s := res.Session.Parent(); s != nil; s = s.Parent() {
			add(reader{session: s.ID}, nil)
		}
	}
	return out
}

// list writes what rs read since its last reads record as reads records
// and returns the newest one ("" when it never read anything). res is the
// reader the records name (principal, pid, exe, session).
func (t *Reads) list(rs *readSet, res *principal.Resolved) string {
	rs.emit.Lock()
	defer rs.emit.Unlock()
	t.mu.Lock()
	todo := append([]readEntry(nil), rs.pending...)
	last := rs.last
	t.mu.Unlock()
	if len(todo) == 0 {
		return last
	}
	budget := int64(readHashBudget)
	deadline := time.Now().Add(readHashTime)
	done := 0
	for done < len(todo) {
		var reads []evidence.FileRead
		size := 0
		n := done
		for ; n < len(todo) && len(reads) < readsRecordEntries && size < readsRecordBytes; n++ {
			e := &todo[n]
			if e.hash == "" {
				e.hash = t.hash(e.rel, e.fp, &budget)
				if budget > 0 && n%64 == 63 && time.Now().After(deadline) {
					budget = 0 // the cache still answers
				}
			}
			var fr evidence.FileRead
			fr.SetPath(e.rel)
			if fr.Hash = e.hash; fr.Hash == "" {
				fr.Fp = e.fp.String()
			}
			reads = append(reads, fr)
			size += len(e.rel)*2 + len(fr.Fp) + len(fr.Hash) + 40
		}
		subj := res.Subject()
		parents := []string{}
		if last != "" {
			parents = append(parents, last)
		}
		id := t.led.Record(&evidence.Record{Type: evidence.TypeReads, Principal: subj.Principal.String(),
			Taint: ledger.TaintNames(subj.Taint), Parents: parents,
			Meta: evidence.Meta{Op: "read", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
				Session: subj.Session, Reason: "files read through the mount"},
			Payload: &evidence.Payload{Reads: reads}})
		if id == "" {
			break // not recorded: the entries stay pending
		}
		last = id
		done = n
	}
	t.mu.Lock()
	rs.pending = rs.pending[done:]
	if len(rs.pending) == 0 {
		rs.pending = nil
	}
	rs.last = last
	t.mu.Unlock()
	return last
}

// hash is the SHA-256 of the version of rel with fingerprint fp, or ""
// when it is not there any more, is too big, or the budget is spent.
func (t *Reads) hash(rel string, fp fingerprint, budget *int64) string {
	t.hashMu.Lock()
	h, ok := t.hashes[fp]
	t.hashMu.Unlock()
	if ok {
		return h
	}
	if *budget <= 0 || fp.Size > readHashMax || fp.Size > *budget {
		return ""
	}
	*budget -= 4096 // opening a file costs too, whatever its size
	f, err := t.dir.OpenFile(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return ""
	}
	defer f.Close()
	fd := int(f.Fd())
	same := func() bool {
		var st syscall.Stat_t
		return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && fingerprintOf(&st) == fp
	}
	if !same() {
		return ""
	}
	sum := sha256.New()
	n, err := io.Copy(sum, io.LimitReader(f, readHashMax+1))
	*budget -= n
	if err != nil || n != fp.Size || !same() {
		return ""
	}
	h = hex.EncodeToString(sum.Sum(nil))
	t.hashMu.Lock()
	if t.hashes == nil || len(t.hashes) >= readHashCacheMax {
		t.hashes = map[fingerprint]string{}
	}
	t.hashes[fp] = h
	t.hashMu.Unlock()
	return h
}

// # Sessions retired
//
// The registry retires a session that has ended and has no process left
// (principal/archive.go); Forget then drops what it read (first listed in
// a reads record, so that nothing it read is missing from the log), so
// that memory follows the sessions that are live. A session that comes
// back (resumed, or a process of it found again) continues its provenance
// chain: its reads set starts from its newest reads record, which the
// log's index gives (SetLastReads).

// Forget drops the reads set of session s, listing first what it read
// since its last reads record.
func (t *Reads) Forget(s *principal.Session) {
	k := reader{session: s.ID}
	t.mu.Lock()
	rs := t.sets[k]
	pending := rs != nil && len(rs.pending) > 0
	t.mu.Unlock()
	if pending {
		t.list(rs, rs.res)
	}
	t.mu.Lock()
	if rs != nil && t.sets[k] == rs && len(rs.pending) == 0 {
		t.seen -= len(rs.seen)
		delete(t.sets, k)
	}
	t.mu.Unlock()
}

// SetLastReads gives a way to find a session's newest reads record when a
// reads set is started for it.
func (t *Reads) SetLastReads(f func(session string) string) {
	t.mu.Lock()
	t.lastReads = f
	t.mu.Unlock()
}
