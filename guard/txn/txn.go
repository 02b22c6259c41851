package txn

import (
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/policy"
)

// Config is what a Txn works with.
type Config struct {
	Dir        *backing.Dir
	Ledger     *ledger.Ledger
	Labels     *label.Store
	Changes    *tracking.Changes
	Index      *tracking.Index
	Objects    *tracking.Objects
	StagingDir string // in the state directory: staged content past stagingInMemory
}

// Txn carries out the guarded changes of one root.
type Txn struct {
	c   Config
	ids Identities
}

// Identities keeps the identity the kernel knows a guarded file by across
// the renames that publish its versions (the FUSE side implements it).
type Identities interface {
	// Before is called just before the file old (open O_PATH; Before owns
	// it) is replaced by a rename.
	Before(old *os.File) any
	// After is called once the file open as fd has been renamed over it.
	After(prev any, fd int)
	// Failed is called when the rename did not happen.
	Failed(prev any)
	// Changed is called once rel changed, or may have, without the kernel
	// making the change through its own handle of the file (a restore, a
	// rename or removal, content found changed in the backing directory):
	// what the kernel caches of rel no longer describes it.
	Changed(rel string)
}

// New prepares the transaction of a root.
func New(c Config) (*Txn, error) {
	if err := os.MkdirAll(c.StagingDir, 0o700); err != nil {
		return nil, err
	}
	return &Txn{c: c}, nil
}

// SetIdentities sets what keeps the kernel's identities (before the mount
// serves).
func (t *Txn) SetIdentities(i Identities) { t.ids = i }

// Changed tells the kernel's side that rel changed behind it
// (Identities.Changed).
func (t *Txn) Changed(rel string) {
	if t.ids != nil {
		t.ids.Changed(rel)
	}
}

// Lock takes the locks of every path a change touches (Changes.Lock).
func (t *Txn) Lock(paths ...string) func() { return t.c.Changes.Lock(paths...) }

// Change is one guarded change.
type Change struct {
	// Keep are the paths whose current content the change needs: every
	// guarded path it changes (the previous version) and every source of
	// content that arrives at a guarded name. Each is kept as a blob
	// before anything else happens.
	Keep []string
	// After says what each guarded path holds once the change is
	// published, given the kept contents: a content hash, or "" for
	// absent. Its keys are exactly the guarded paths the change touches.
	After func(old map[string]string) map[string]string
	// Prepare stores the new content and stages what Publish needs, given
	// the kept contents; it returns the change's records. It may set a
	// kept content to "" for a path it knows holds no version (a commit's
	// own empty placeholder): a change not applied then goes back to
	// absent.
	Prepare func(old map[string]string) ([]*evidence.Record, syscall.Errno)
	// Publish makes the change visible in the backing directory; ids are
	// the records' ids.
	Publish func(ids []string) syscall.Errno
	// Done updates labels and indexes once published.
	Done func(ids []string) syscall.Errno
	// Abort releases what Prepare staged when the change does not happen.
	Abort func()
	// ThroughKernel: the change is the commit of content the kernel wrote
	// through its own handle of the file (a staging handle), which knows
	// what it wrote; the handle settles the rest (fs, file_staged.go).
	// Every other change is told to the kernel's side (Identities.Changed).
	ThroughKernel bool
}

// Apply carries out c. Called with the locks of every path in c.Keep and
// every key of c.After held (Lock).
func (t *Txn) Apply(c *Change) (errno syscall.Errno) {
	ok := false
	defer func() {
		if !ok && c.Abort != nil {
			c.Abort()
		}
	}()
	old := make(map[string]string, len(c.Keep))
	for _, p := range c.Keep {
		if _, done := old[p]; done {
			continue
		}
		h, errno := t.Keep(p)
		if errno != 0 {
			return errno
		}
		old[p] = h
	}
	after := c.After(old)
	paths := make([]string, 0, len(after))
	for p := range after {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var recs []*evidence.Record
	if c.Prepare != nil {
		if recs, errno = c.Prepare(old); errno != 0 {
			return errno
		}
	}
	// The drift watcher sees the publication: say beforehand what the
	// names will hold, and leave them alone until the change is done.
	unexpect, end := t.c.Changes.Begin(after)
	defer end()
	ids, err := t.c.Ledger.All(recs)
	if err != nil {
		t.c.Ledger.Log.Error().Err(err).Strs("paths", paths).Msg("guarded change refused: its record cannot be made durable")
		unexpect()
		return syscall.EIO
	}
	errno = c.Publish(ids)
	if !c.ThroughKernel {
		for _, p := range paths {
			t.Changed(p)
		}
	}
	if errno != 0 {
		unexpect()
		t.notApplied(paths, old, after, ids, errno)
		return errno
	}
	ok = true
	if c.Done != nil {
		if errno := c.Done(ids); errno != 0 {
			// The change is recorded and published: the caller must not
			// be told it failed (a writer whose close failed would take
			// its content for refused while every reader sees it). What
			// failed is bookkeeping after the fact (a label that could
			// not be stored on a full state directory).
			t.c.Ledger.Log.Error().Err(errno).Strs("paths", paths).Msg("guarded change published, but its labels or indexes could not be updated")
		}
	}
	return 0
}

// notApplied records that a change whose records are durable was refused
// by the backing filesystem: the paths are back at (still at) their kept
// versions.
func (t *Txn) notApplied(paths []string, old, after map[string]string, ids []string, errno syscall.Errno) {
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
		_, err := t.c.Ledger.Must(r)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.c.Ledger.Log.Error().Err(err).Strs("paths", paths).Msg("a recorded change was not applied and the log cannot say so; the next mount completes it")
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// notAppliedPatience is how long a change that was recorded but could not
// be published waits for the log to accept the record that says so.
var notAppliedPatience = time.Minute

// Keep keeps the current content of a guarded path as a blob and returns
// its hash: "" when the path is absent or not a regular file.
func (t *Txn) Keep(rel string) (string, syscall.Errno) {
	st, err := t.c.Dir.Lstat(rel)
	if err != nil {
		if os.IsNotExist(err) {
			return "", 0
		}
		return "", backing.Errno(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", 0
	}
	if l := t.c.Labels.Get(label.KeyOf(st)); l != nil && l.Hash != "" && l.Matches(st) && t.c.Ledger.HasBlob(l.Hash) {
		// Stored already: it was the new content of the last commit.
		return l.Hash, 0
	}
	f, err := t.c.Dir.OpenFile(rel, os.O_RDONLY)
	var h string
	if err == nil {
		h, err = t.c.Ledger.PutBlobFile(backing.FdPath(f))
		f.Close()
	}
	if err != nil {
		t.c.Ledger.Log.Error().Err(err).Str("path", rel).Msg("cannot keep previous version")
		return "", syscall.EIO
	}
	return h, 0
}

// Store keeps the content of the backing file rel as a blob.
func (t *Txn) Store(rel string) (string, error) {
	f, err := t.c.Dir.OpenFile(rel, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return t.c.Ledger.PutBlobFile(backing.FdPath(f))
}

// Forget forgets the inode k: its last name is gone, and its number will
// be given to another file, which must not inherit its label, its class
// or its lookers.
func (t *Txn) Forget(k label.Key) {
	t.c.Index.Forget(k)
	t.c.Labels.Set(k, nil)
	t.c.Objects.Forget(k)
}
