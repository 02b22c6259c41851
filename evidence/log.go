package evidence

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("evidence: log is closed")

// maxBatch bounds one group commit, so a flood of appends still gets
// checkpoints and bounded latency.
const maxBatch = 4096

// Log is the append side of the evidence log. One process holds it at a
// time (flock on evidence/lock); any number of readers may run beside it.
type Log struct {
	dir    string
	lock   *os.File
	logf   *os.File
	idxf   *os.File
	hashf  *os.File
	signer note.Signer
	vkey   string
	origin string

	sendMu sync.RWMutex // held for reading while sending to reqs
	closed bool
	reqs   chan *appendReq
	done   chan struct{}

	mu sync.Mutex // guards the fields below; written by the committer
	n  int64      // records durable and checkpointed
	// acked: records acknowledged to a caller (or found at open). Only a
	// successful batch moves it; a heal must find exactly these.
	acked  int64
	logEnd int64
	hashes hashFile
	idt    *idTable // ids.go: every record's id → its position
	cp     []byte
	broken error // set when a write failed: the files need recovery (heal)
	// uncp: records are acknowledged that no checkpoint covers yet (the
	// derived files and the checkpoint are written lazily, see
	// checkpointDelay); lastCP is when the last checkpoint was signed.
	uncp   bool
	lastCP time.Time
	// healedFrom is the failure the last heal recovered from, recorded
	// with the first batch after it.
	healedFrom error
	// healWait and nextHeal pace the heals of a broken log (retry with
	// backoff): a batch that comes before nextHeal fails at once with
	// the error, and the committer tries by itself at nextHeal, so the
	// log heals once the cause goes away even when nobody appends.
	healWait time.Duration
	nextHeal time.Time
	// onHealth is told when the log starts failing (the error) and when
	// it has healed (nil). Called by the committer, without l.mu.
	onHealth    func(error)
	healthNoted error

	// The journal (journal.go): jpos is where the next frame goes,
	// jalloc how far its space is allocated. Written by the committer.
	jf     *os.File
	jpos   int64
	jalloc int64

	dirsMu    sync.Mutex
	blobDirs  map[string]bool // blob directories with names not yet synced
	subdirs   map[string]bool // blob directories known to exist (under dirsMu)
	blobFiles map[string]bool // blobs whose content is not yet synced
	// packs: where content from the journal is stored (pack.go).
	packs *packSet
	// lateDirs, lateFiles: the same for blob files written from a
	// durable journal frame, flushed before the next checkpoint instead of
	// with the next batch.
	lateDirs, lateFiles map[string]bool
	// memBlobs: content on its way through the journal (putBlobMem).
	memBlobs map[string]*memBlob

	// gc (gc.go): gcMu is held for reading while content is stored and
	// for writing while a prune decides and removes; live is content
	// stored that no acknowledged record names yet, gone content a prune
	// removed (under liveMu).
	gcMu   sync.RWMutex
	liveMu sync.Mutex
	live   map[string]*liveBlob
	gone   map[[32]byte]int64 // content hash → when a prune removed it (unix ns)
}

type appendReq struct {
	canon []byte
	id    [32]byte
	rec   *Record
	err   chan error
	// barrier requests carry no record: they are answered once everything
	// queued before them is durable and checkpointed.
	barrier bool
	// queued: nobody waits for this record (AppendAsync).
	queued bool
	// group: further records that commit with this one or not at all
	// (AppendAll); answered through this request's err.
	group []*appendReq
	// prune: a gc's request (gc.go), run between batches.
	prune *pruneReq
}

// Flush returns once every record queued before the call (AppendAsync
// included) is durable and covered by the checkpoint, so that readers see
// it.
func (l *Log) Flush() error {
	req := &appendReq{barrier: true, err: make(chan error, 1)}
	l.sendMu.RLock()
	if l.closed {
		l.sendMu.RUnlock()
		return ErrClosed
	}
	l.reqs <- req
	l.sendMu.RUnlock()
	return <-req.err
}

// Open opens stateDir's evidence log for appending. It takes the
// exclusive lock, checks that everything the signed checkpoint covers is
// still there, cuts a torn tail (records past the checkpoint that are
// partial or whose stored hash does not match) and records the cut.
func Open(stateDir string) (*Log, error) {
	dir := evDir(stateDir)
	l := &Log{dir: dir, blobDirs: map[string]bool{}, blobFiles: map[string]bool{}, subdirs: map[string]bool{},
		lateDirs: map[string]bool{}, lateFiles: map[string]bool{}, memBlobs: map[string]*memBlob{}}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("evidence: open: %w (run aerfs init first?)", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("evidence: log %s is in use by another process (is an aerfs daemon already running?)", dir)
		}
		return nil, fmt.Errorf("evidence: lock %s: %w", dir, err)
	}
	l.lock = lock
	// Blobs whose writer died before their rename: never referenced (a
	// record names a blob only once it is in place). Only the lock holder
	// writes blobs, so every temporary here is from a process that died.
	if torn, _ := filepath.Glob(filepath.Join(dir, blobsName, ".tmp-blob-*")); len(torn) > 0 {
		for _, p := range torn {
			os.Remove(p)
		}
	}
	ok := false
	defer func() {
		if !ok {
			l.closeFiles()
		}
	}()
	// The packs as they are on disk now (a crash, another process may
	// have changed them since this process last read them).
	l.packs = packsOf(dir)
	if err := l.packs.own(); err != nil {
		return nil, err
	}
	skey, err := os.ReadFile(filepath.Join(dir, keyName))
	if err != nil {
		return nil, fmt.Errorf("evidence: open: %w", err)
	}
	if l.signer, err = note.NewSigner(strings.TrimSpace(string(skey))); err != nil {
		return nil, fmt.Errorf("evidence: %s: %w", keyName, err)
	}
	if l.vkey, err = PublicKey(stateDir); err != nil {
		return nil, err
	}
	l.origin = l.signer.Name()
	for _, p := range []struct {
		f    **os.File
		name string
	}{{&l.logf, logName}, {&l.idxf, indexName}, {&l.hashf, hashesName}} {
		if *p.f, err = os.OpenFile(filepath.Join(dir, p.name), os.O_RDWR, 0); err != nil {
			return nil, fmt.Errorf("evidence: open: %w", err)
		}
	}
	l.cp, err = os.ReadFile(filepath.Join(dir, checkpointName))
	if err != nil {
		return nil, fmt.Errorf("evidence: open: %w", err)
	}
	cp, err := OpenCheckpoint(l.cp, l.vkey)
	if err != nil {
		return nil, fmt.Errorf("evidence: open: %w", err)
	}
	replayed, err := l.openJournal(cp)
	if err != nil {
		return nil, err
	}
	cut, err := l.recover(cp)
	if err != nil {
		return nil, err
	}
	if fi, err := l.jf.Stat(); err == nil {
		l.jalloc = fi.Size()
	}
	if l.n > cp.Size {
		// Records past a stale checkpoint (replayed from the journal, or
		// flushed before a crash): sign what is there before the journal
		// starts again, so that its frames always begin at a durable
		// checkpoint.
		if err := l.writeCheckpoint(); err != nil {
			return nil, err
		}
	}
	l.acked = l.n
	l.lastCP = time.Now() // verified (or signed) just now
	l.reqs = make(chan *appendReq, maxBatch)
	l.done = make(chan struct{})
	go l.committer()
	ok = true
	if cut != nil || replayed > 0 {
		detail := fmt.Sprintf("journal: %d acknowledged records rebuilt in the log", replayed)
		if cut != nil {
			detail = cut.String() + "; " + detail
		}
		reason := "torn tail cut at open"
		if cut == nil {
			reason = "acknowledged records restored from the journal at open"
		}
		r := &Record{
			Type: TypeRecovery, Principal: "SYS",
			Meta: Meta{Op: "open", UID: uint32(os.Getuid()), Pid: os.Getpid(),
				Reason: reason},
			Payload: &Payload{Detail: detail},
		}
		if _, err := l.Append(r); err != nil {
			l.Close()
			return nil, fmt.Errorf("evidence: record recovery: %w", err)
		}
	}
	return l, nil
}

// Append adds r to the log and returns its id once the record is durable.
// The checkpoint that covers it is signed before any reader (Size,
// Checkpoint, Flush) or later batch sees the log. It fills Version,
// Meta.Time (now, UTC, nanoseconds) and empty Taint/Parents arrays when
// unset. Parents must already be in the log and payload hashes must name
// stored blobs. Concurrent callers share fsyncs (group commit).
func (l *Log) Append(r *Record) (string, error) {
	req, err := l.enqueue(r)
	if err != nil {
		return "", err
	}
	if err := <-req.err; err != nil {
		return "", err
	}
	return hex.EncodeToString(req.id[:]), nil
}

// AppendAll adds the records in order, all in one batch: either every one
// of them is durable when it returns, or none is (a failed batch is cut
// when the log heals). A later record may name an earlier one as parent.
// It is for changes that more than one record describes (a rename onto a
// guarded name: the source leaving and the content arriving).
func (l *Log) AppendAll(rs ...*Record) ([]string, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	reqs := make([]*appendReq, len(rs))
	for i, r := range rs {
		req, err := l.makeReq(r, false)
		if err != nil {
			return nil, err
		}
		reqs[i] = req
	}
	head := reqs[0]
	head.group = reqs[1:]
	l.sendMu.RLock()
	if l.closed {
		l.sendMu.RUnlock()
		return nil, ErrClosed
	}
	l.reqs <- head
	l.sendMu.RUnlock()
	if err := <-head.err; err != nil {
		return nil, err
	}
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = hex.EncodeToString(r.id[:])
	}
	return ids, nil
}

// AppendAsync queues r like Append and returns its id at once, without
// waiting for the record to be durable: it is written and synced with the
// next group commit, in order with every other record, typically within
// a millisecond. It is for records whose syscall must not wait for a disk
// flush (a refused open); a crash in that window can lose such a record,
// never one written with Append. An error found at commit is passed to
// onErr (which may be nil).
func (l *Log) AppendAsync(r *Record, onErr func(error)) (string, error) {
	req, err := l.enqueueReq(r, true)
	if err != nil {
		return "", err
	}
	go func() {
		if err := <-req.err; err != nil && onErr != nil {
			onErr(err)
		}
	}()
	return hex.EncodeToString(req.id[:]), nil
}

// HasBlob reports whether content with this hash is stored (or on its
// way through the journal, which makes it durable no later than any record
// naming it).
func (l *Log) HasBlob(hash string) bool {
	if !IsHash(hash) {
		return false
	}
	l.dirsMu.Lock()
	_, mem := l.memBlobs[hash]
	l.dirsMu.Unlock()
	if mem {
		return true
	}
	return blobStored(l.dir, hash)
}

func (l *Log) enqueue(r *Record) (*appendReq, error) { return l.enqueueReq(r, false) }

func (l *Log) enqueueReq(r *Record, queued bool) (*appendReq, error) {
	req, err := l.makeReq(r, queued)
	if err != nil {
		return nil, err
	}
	l.sendMu.RLock()
	if l.closed {
		l.sendMu.RUnlock()
		return nil, ErrClosed
	}
	l.reqs <- req
	l.sendMu.RUnlock()
	return req, nil
}

// makeReq fills r's defaults and makes its canonical form.
func (l *Log) makeReq(r *Record, queued bool) (*appendReq, error) {
	if r.Version == 0 {
		r.Version = RecordVersion
	}
	if r.Meta.Time == "" {
		r.Meta.Time = FormatTime(time.Now())
	}
	if r.Taint == nil {
		r.Taint = []string{}
	}
	if r.Parents == nil {
		r.Parents = []string{}
	}
	r.normalizeNames()
	canon, err := r.Canonical()
	if err != nil {
		return nil, fmt.Errorf("evidence: append: %w", err)
	}
	if p := r.Payload; p != nil {
		for _, h := range p.BlobRefs() {
			if h != "" {
				if !l.HasBlob(h) {
					return nil, fmt.Errorf("evidence: append: payload names blob %s, which is not stored (PutBlob first)", h)
				}
			}
		}
	}
	return &appendReq{canon: canon, id: sha256.Sum256(canon), rec: r, err: make(chan error, 1), queued: queued}, nil
}

// heal brings a log whose last write failed (a full disk, an I/O error)
// back to the records that were acknowledged, without a reopen: the log is
// cut to its acknowledged end (a batch that failed was answered with an
// error and must not survive), the index and stored hashes past the signed
// checkpoint are rebuilt from the log as Open does, everything is flushed
// and a checkpoint is signed. It is tried again with every batch until the
// cause goes away. Called with l.mu held.
func (l *Log) heal() error {
	cause := l.broken
	fail := func(err error) error { return err } // l.broken keeps the first cause
	if err := l.cutJournal(); err != nil {
		return fail(err)
	}
	if err := l.logf.Truncate(l.logEnd); err != nil {
		return fail(err)
	}
	if err := syncFile(l.logf); err != nil {
		return fail(err)
	}
	cp, err := OpenCheckpoint(l.cp, l.vkey)
	if err != nil {
		return fail(err)
	}
	if _, err := l.recover(cp); err != nil {
		return fail(err)
	}
	if l.n != l.acked {
		// Acknowledged records are whole lines below logEnd; anything
		// else means the files are not what this process wrote. (An
		// earlier attempt's recover may have lowered l.n: compare with
		// what was acknowledged, which only a batch moves.)
		return fail(fmt.Errorf("evidence: heal found %d records, expected %d", l.n, l.acked))
	}
	if err := l.writeMemBlobs(true); err != nil {
		return fail(err)
	}
	if err := errors.Join(syncFile(l.idxf), syncFile(l.hashf), l.syncBlobDirs(true)); err != nil {
		return fail(err)
	}
	if err := l.writeCheckpointLocked(); err != nil {
		return fail(err)
	}
	l.healedFrom = cause
	l.broken = nil
	l.uncp = false
	l.lastCP = time.Now()
	return nil
}

// Heals of a broken log are retried with a backoff from healWaitMin,
// doubling to healWaitMax: a full disk is not hammered by every refused
// change, and the log heals within healWaitMax once space is back.
var (
	healWaitMin = 5 * time.Millisecond
	healWaitMax = 500 * time.Millisecond
)

// tryHeal heals a broken log when its time has come (see healWait), or
// at once when now (somebody waits for the batch: a change must not fail
// once the cause is gone). Called with l.mu held; it reports whether the
// log is whole.
func (l *Log) tryHeal(now bool) bool {
	if l.broken == nil {
		return true
	}
	if !now && time.Now().Before(l.nextHeal) {
		return false
	}
	if err := l.heal(); err != nil {
		l.healWait = min(max(2*l.healWait, healWaitMin), healWaitMax)
		l.nextHeal = time.Now().Add(l.healWait)
		return false
	}
	l.healWait, l.nextHeal = 0, time.Time{}
	return true
}

// OnHealth sets a function told, from the committer, when the log starts
// failing (with the error) and when it has healed by itself (nil).
func (l *Log) OnHealth(f func(error)) {
	l.mu.Lock()
	l.onHealth = f
	l.mu.Unlock()
}

// noteHealth tells onHealth about a change of l.broken since it was last
// told. Called by the committer without l.mu.
func (l *Log) noteHealth() {
	l.mu.Lock()
	f, now, was := l.onHealth, l.broken, l.healthNoted
	l.healthNoted = now
	l.mu.Unlock()
	if f != nil && (now == nil) != (was == nil) {
		f(now)
	}
}

// committer owns all writes. It takes whatever is queued, writes it as one
// batch, syncs once per file, signs one checkpoint and answers everyone.
func (l *Log) committer() {
	defer close(l.done)
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer func() {
		// Closing: everything acknowledged gets its checkpoint.
		l.mu.Lock()
		l.checkpointIfDue(true)
		l.mu.Unlock()
	}()
	for {
		l.noteHealth()
		var first *appendReq
		l.mu.Lock()
		due := l.uncp
		var healIn time.Duration
		if l.broken != nil {
			healIn = max(time.Until(l.nextHeal), time.Millisecond)
		}
		l.mu.Unlock()
		if healIn > 0 {
			// Broken: heal by itself at the next retry, unless an
			// append comes first (which tries then).
			idle.Reset(healIn)
			select {
			case r, ok := <-l.reqs:
				idle.Stop()
				if !ok {
					return
				}
				first = r
			case <-idle.C:
				l.commit(nil)
				continue
			}
		} else if due {
			// Records wait for their checkpoint: sign it once the log has
			// been quiet for checkpointDelay, unless more come first.
			idle.Reset(checkpointDelay)
			select {
			case r, ok := <-l.reqs:
				idle.Stop()
				if !ok {
					return
				}
				first = r
			case <-idle.C:
				l.mu.Lock()
				l.checkpointIfDue(true)
				l.mu.Unlock()
				continue
			}
		} else {
			r, ok := <-l.reqs
			if !ok {
				return
			}
			first = r
		}
		batch := []*appendReq{first}
		// A batch of queued records only waits up to queuedLinger for
		// company; the first request somebody waits for ends the wait.
		var linger *time.Timer
		var expired <-chan time.Time
		if first.queued {
			linger = time.NewTimer(queuedLinger)
			expired = linger.C
		}
	collect:
		for len(batch) < maxBatch {
			if expired == nil {
				select {
				case r, ok := <-l.reqs:
					if !ok {
						break collect
					}
					batch = append(batch, r)
				default:
					break collect
				}
				continue
			}
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break collect
				}
				batch = append(batch, r)
				if !r.queued {
					expired = nil
				}
			case <-expired:
				expired = nil
			}
		}
		if linger != nil {
			linger.Stop()
		}
		l.commitBatch(batch)
	}
}

// checkpointDelay and checkpointEvery bound how long acknowledged records
// wait for the checkpoint that covers them: it is signed once appends have
// paused for checkpointDelay, at least every checkpointEvery under a steady
// stream, and at once for a flush barrier (a reader) or at Close. The
// records themselves are durable when acknowledged (the log is flushed);
// recovery rebuilds what the checkpoint does not cover yet. Deferring it
// keeps a stream of guarded commits to one round of flushes each instead
// of three (log; index and hashes; checkpoint). The pause is long enough
// that the think time of a writer committing one change after another
// (a few milliseconds) does not end it: a checkpoint costs six flushes
// (log, index, hashes, packs, the checkpoint and its directory), which
// paid after every commit of such a stream doubled its flushes and
// delayed the next commit behind them.
var (
	checkpointDelay = 50 * time.Millisecond
	checkpointEvery = 200 * time.Millisecond
)

// checkpointIfDue makes the derived files durable and signs a checkpoint
// covering every acknowledged record, if some are not covered and (unless
// now) checkpointEvery has passed. Called with l.mu held.
func (l *Log) checkpointIfDue(now bool) {
	if !l.uncp || l.broken != nil {
		return
	}
	if !now && time.Since(l.lastCP) < checkpointEvery {
		return
	}
	if err := l.writeMemBlobs(true); err != nil {
		l.broken = fmt.Errorf("evidence: blob not written, healed with the next append: %w", err)
		return
	}
	if err := l.syncDerived(); err != nil {
		l.broken = fmt.Errorf("evidence: log, index, hashes or blobs not synced, healed with the next append: %w", err)
		return
	}
	if err := l.writeCheckpointLocked(); err != nil {
		l.broken = fmt.Errorf("evidence: checkpoint not written, healed with the next append: %w", err)
		return
	}
	l.uncp = false
	l.lastCP = time.Now()
}

// queuedLinger is how long a batch holding only queued records (verdicts,
// taint notes: AppendAsync) waits before it is written. A synchronous
// append or a flush that arrives meanwhile joins the batch and ends the
// wait, so the record of a guarded commit shares its flush with the verdict
// of the open that preceded it instead of queueing behind it; a burst of
// refusals shares one flush. It is also the bound on what a crash can lose
// of queued records.
var queuedLinger = 2 * time.Millisecond // a variable only so that a test can widen it

func (l *Log) commit(batch []*appendReq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	waited := false
	for _, r := range batch {
		waited = waited || !r.queued
	}
	if !l.tryHeal(waited) {
		for _, r := range batch {
			r.err <- l.broken
		}
		return
	}
	if l.healedFrom != nil {
		// The first record after a heal says what the log recovered from.
		if req, err := l.makeReq(&Record{Type: TypeRecovery, Principal: "SYS",
			Meta: Meta{Op: "heal", UID: uint32(os.Getuid()), Pid: os.Getpid(),
				Reason: "the evidence log failed and recovered by itself; no change was acknowledged without its record"},
			Payload: &Payload{Detail: l.healedFrom.Error()}}, true); err == nil {
			batch = append([]*appendReq{req}, batch...)
		}
		l.healedFrom = nil
	}
	var logBuf, idxBuf []byte
	var frameRecs [][]byte
	var accepted []*appendReq
	local := map[[32]byte]bool{}
	end := l.logEnd
	n := l.n
	l.hashes.pending = l.hashes.pending[:0]
	var barriers []*appendReq
	defer func() {
		// Everything before a barrier was in this batch or an earlier one,
		// and those are done when commit returns.
		for _, b := range barriers {
			b.err <- l.broken
		}
	}()
	for _, r := range batch {
		if r.barrier {
			barriers = append(barriers, r)
			continue
		}
		members := append([]*appendReq{r}, r.group...)
		var err error
		for _, q := range members {
			if err = l.admit(q, local); err != nil {
				break
			}
			local[q.id] = true
		}
		if err != nil {
			for _, q := range members {
				delete(local, q.id)
			}
			r.err <- err
			continue
		}
		mark := len(l.hashes.pending)
		for i, q := range members {
			hs, herr := tlog.StoredHashesForRecordHash(n+int64(i), leafHash(q.id), &l.hashes)
			if herr != nil {
				err = herr
				break
			}
			l.hashes.pending = append(l.hashes.pending, hs...)
		}
		if err != nil {
			l.hashes.pending = l.hashes.pending[:mark]
			for _, q := range members {
				delete(local, q.id)
			}
			r.err <- fmt.Errorf("evidence: append: %w", err)
			continue
		}
		for _, q := range members {
			frameRecs = append(frameRecs, q.canon)
			logBuf = append(append(logBuf, q.canon...), '\n')
			end += int64(len(q.canon)) + 1
			var e [indexEntrySize]byte
			binary.BigEndian.PutUint64(e[:8], uint64(end))
			copy(e[8:], q.id[:])
			idxBuf = append(idxBuf, e[:]...)
			n++
		}
		accepted = append(accepted, r)
	}
	if len(accepted) == 0 {
		// A flush with nothing new to write still makes the blobs stored
		// so far durable (those still in memory written as files first:
		// a reader of the state directory may want them), and the
		// records acknowledged so far checkpointed.
		if len(barriers) > 0 {
			if err := l.writeMemBlobs(false); err != nil {
				l.broken = fmt.Errorf("evidence: blob not written, healed with the next append: %w", err)
				return
			}
		}
		if err := l.syncBlobDirs(len(barriers) > 0); err != nil {
			l.broken = fmt.Errorf("evidence: blob directory not synced, healed with the next append: %w", err)
			return
		}
		l.checkpointIfDue(len(barriers) > 0)
		return
	}
	var hashBuf []byte
	for _, h := range l.hashes.pending {
		hashBuf = append(hashBuf, h[:]...)
	}
	// The records and the content they name not yet durable go into one
	// journal frame, and that one file is flushed: the commit's only flush
	// (journal.go). The log, index and hashes are written beside it and
	// flushed before the next checkpoint. Content too large for the journal
	// was written as blob files, flushed here with the frame.
	pending := l.takePending()
	err := l.writeBatch(logBuf, idxBuf, hashBuf)
	var frame []byte
	if err == nil {
		frame = encodeFrame(l.n, frameRecs, pending)
		l.dirsMu.Lock()
		direct := len(l.blobFiles) > 0 || len(l.blobDirs) > 0
		l.dirsMu.Unlock()
		if direct {
			blobErr := make(chan error, 1)
			go func() { blobErr <- l.syncBlobDirs(false) }()
			err = errors.Join(l.writeFrame(frame), <-blobErr)
		} else {
			err = l.writeFrame(frame)
		}
	}
	if err == nil {
		i := l.n
		for _, r := range accepted {
			for _, q := range append([]*appendReq{r}, r.group...) {
				l.idt.add(q.id, i)
				i++
			}
		}
		l.n = n
		l.acked = n
		l.logEnd = end
		l.hashes.n += int64(len(l.hashes.pending))
		l.hashes.pending = l.hashes.pending[:0]
		// The records and their content are durable (the journal frame
		// is flushed): answer now. The log, the index, the hashes, the
		// blob files and the checkpoint follow lazily (checkpointIfDue): a
		// crash before they are durable loses none of the records, since
		// Open rebuilds the log past the checkpoint from the journal and
		// the index and hashes from the log, and signs a new checkpoint. A
		// flush barrier (a reader) gets them at once. Taking those flushes
		// off the appenders' path is what keeps a guarded commit to one.
		l.jpos += int64(len(frame))
		for _, r := range accepted {
			l.named(r.rec)
			for _, q := range r.group {
				l.named(q.rec)
			}
			r.err <- nil
		}
		// The answered appenders wait on this goroutine's processor
		// (the runtime queues a woken receiver behind its waker): let them
		// run before the blob files are written.
		runtime.Gosched()
		l.materialize(pending)
		l.idt.maybeFlush(l.n)
		l.uncp = true
		l.checkpointIfDue(len(barriers) > 0)
		return
	}
	l.hashes.pending = l.hashes.pending[:0]
	l.broken = fmt.Errorf("evidence: log write failed, healed with the next append: %w", err)
	for _, r := range accepted {
		r.err <- l.broken
	}
}

// admit applies the checks that depend on the log's state: no duplicate
// ids, and parents that are already recorded (earlier in this batch
// counts), so the provenance DAG only ever points backwards.
func (l *Log) admit(r *appendReq, local map[[32]byte]bool) error {
	if _, dup := l.idt.lookup(r.id); dup || local[r.id] {
		return fmt.Errorf("evidence: append: record %x is already in the log", r.id)
	}
	if h := l.prunedUnder(r.rec); h != "" {
		return fmt.Errorf("evidence: append: content %.12s was removed by aerfs gc after it was stored; the change must be made again", h)
	}
	for _, p := range r.rec.Parents {
		var pid [32]byte
		hex.Decode(pid[:], []byte(p))
		if local[pid] {
			continue
		}
		if _, ok := l.idt.lookup(pid); !ok {
			if _, ok := l.idt.scan(pid, l.n); !ok {
				return fmt.Errorf("evidence: append: parent %s is not in the log", p)
			}
		}
	}
	return nil
}

func (l *Log) writeBatch(logBuf, idxBuf, hashBuf []byte) error {
	if _, err := l.logf.WriteAt(logBuf, l.logEnd); err != nil {
		return err
	}
	if _, err := l.idxf.WriteAt(idxBuf, l.n*indexEntrySize); err != nil {
		return err
	}
	if _, err := l.hashf.WriteAt(hashBuf, l.hashes.n*tlog.HashSize); err != nil {
		return err
	}
	return nil
}

// syncDerived makes the log, the index, the stored hashes and the blob
// files written from the journal durable, in parallel, before the
// checkpoint that covers them is written. Until then the journal holds
// every acknowledged record and its content (recovery rebuilds the rest).
func (l *Log) syncDerived() error {
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, f := range []*os.File{l.logf, l.idxf, l.hashf} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = syncFile(f)
		}()
	}
	errs[3] = l.syncLateBlobs()
	wg.Wait()
	return errors.Join(errs...)
}

// syncFile is f.Sync; the scaling test swaps it out to measure the work
// that grows with the log rather than the disk's flush latency.
var syncFile = (*os.File).Sync

func (l *Log) writeCheckpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeCheckpointLocked()
}

func (l *Log) writeCheckpointLocked() error {
	root, err := tlog.TreeHash(l.n, &l.hashes)
	if err != nil {
		return fmt.Errorf("evidence: checkpoint: %w", err)
	}
	cp, err := signCheckpoint(Checkpoint{Origin: l.origin, Size: l.n, Root: root}, l.signer)
	if err != nil {
		return fmt.Errorf("evidence: checkpoint: %w", err)
	}
	if err := writeAtomic(filepath.Join(l.dir, checkpointName), cp, 0o644); err != nil {
		return fmt.Errorf("evidence: checkpoint: %w", err)
	}
	// The checkpoint's name is durable before the journal starts again:
	// its frames must never be needed past a checkpoint a crash could
	// take back.
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("evidence: checkpoint: %w", err)
	}
	l.cp = cp
	l.jpos = 0
	return nil
}

// Size is the number of records acknowledged (durable in the log; the
// checkpoint covering them may follow a few milliseconds later).
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Checkpoint returns the latest signed checkpoint note.
func (l *Log) Checkpoint() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return nil, l.broken
	}
	return append([]byte(nil), l.cp...), nil
}

// PublicKey is the verifier key of this log's checkpoints.
func (l *Log) PublicKey() string { return l.vkey }

// Close waits for queued appends to commit, then releases the files and
// the lock.
func (l *Log) Close() error {
	l.sendMu.Lock()
	if l.closed {
		l.sendMu.Unlock()
		return nil
	}
	l.closed = true
	close(l.reqs)
	l.sendMu.Unlock()
	<-l.done
	var errs []error
	l.mu.Lock()
	broken := l.broken != nil
	l.mu.Unlock()
	if broken {
		// A batch failed and nothing healed the log since: heal now (and
		// record it), so that the failed batch does not survive in the
		// journal or the log; a log that cannot heal is at least cut back
		// to what was acknowledged.
		l.commit([]*appendReq{{barrier: true, err: make(chan error, 1)}}) // heals now
		l.mu.Lock()
		if l.broken != nil {
			errs = append(errs, l.broken, l.cutJournal(), l.logf.Truncate(l.logEnd))
		} else {
			l.checkpointIfDue(true)
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Blobs stored after the last batch (no record names them yet).
	errs = append(errs, l.writeMemBlobs(false), l.syncBlobDirs(true), l.closeFiles())
	return errors.Join(errs...)
}

func (l *Log) closeFiles() error {
	if l.packs != nil {
		l.packs.disown()
	}
	if l.idt != nil {
		l.idt.close()
	}
	var first error
	for _, f := range []*os.File{l.logf, l.idxf, l.hashf, l.jf, l.lock} {
		if f != nil {
			if err := f.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
