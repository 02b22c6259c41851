package txn

import (
	"fmt"
	"os"
	"syscall"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/label"
)

// Commit is a decided commit of staged content to a guarded path.
type Commit struct {
	Rel    string
	Staged *os.File
	// Data is the staged content when it is small (SmallContent), read
	// once: stored, hashed and staged from this one copy. nil: read from
	// Staged.
	Data []byte
	Hash string // the staged content's SHA-256
	// Placeholder: only the committing handle's empty placeholder is at
	// Rel. It is no version: the record, and the not-applied record should
	// the change not be applied, say the file was absent.
	Placeholder bool
	// Label is the new content's label (guard/flow).
	Label *label.Label
	// Record is its write record; the hashes are filled here.
	Record *evidence.Record
}

// Commit keeps the previous version, stores the new content, makes the
// record durable and publishes the content (a rename over the file),
// labelled before anyone can open it.
func (t *Txn) Commit(c Commit) syscall.Errno {
	rel := c.Rel
	st, _ := t.c.Dir.Lstat(rel)
	var rep *Replacement
	// The replacement next to the file is staged while the blob is stored
	// and the record made durable: publication waits for both. A staging
	// that fails after the record is durable fails the publication, which
	// the transaction records as not applied.
	type staging struct {
		rep   *Replacement
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
	var preKey *label.Key
	return t.Apply(&Change{
		ThroughKernel: true,
		Keep:          []string{rel},
		After:         func(map[string]string) map[string]string { return map[string]string{rel: c.Hash} },
		Prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
			if c.Placeholder {
				old[rel] = ""
			}
			stagec = make(chan staging, 1)
			go func() {
				r, errno := t.stage(rel, c.Staged, c.Data, st)
				stagec <- staging{r, errno}
			}()
			var h string
			var err error
			if c.Data != nil {
				h, err = t.c.Ledger.PutBlob(c.Data)
			} else {
				h, err = t.c.Ledger.PutBlobFile(backing.FdPath(c.Staged))
			}
			if err == nil && h != c.Hash {
				err = fmt.Errorf("staged content changed while it was stored (%.12s, then %.12s)", c.Hash, h)
			}
			if err != nil {
				t.c.Ledger.Log.Error().Err(err).Str("path", rel).Msg("cannot store staged content")
				return nil, syscall.EIO
			}
			c.Record.Payload = &evidence.Payload{OldHash: old[rel], NewHash: c.Hash}
			return []*evidence.Record{c.Record}, 0
		},
		Publish: func(ids []string) syscall.Errno {
			if errno := waitStage(); errno != 0 {
				return errno
			}
			if !c.Label.Clean() && rep.st != nil {
				// A labelled version is labelled before anyone can open
				// it: a reader between the rename and the binding below
				// inherits its taint (the rename changes its ctime; the
				// label's hash still binds it).
				pl := *c.Label
				pl.Hash, pl.Record = c.Hash, ids[0]
				pl.Bind(rep.st)
				k := label.KeyOf(rep.st)
				if err := t.c.Labels.Set(k, &pl); err != nil {
					t.c.Ledger.Log.Error().Err(err).Str("path", rel).Msg("label of the new version not stored")
					return syscall.EIO
				}
				preKey = &k
			}
			errno := rep.Publish()
			if errno != 0 && preKey != nil {
				// The temporary file is gone; its inode number is free.
				t.c.Labels.Set(*preKey, nil)
			}
			return errno
		},
		Done: func(ids []string) syscall.Errno {
			t.c.Ledger.Stats.Committed.Add(1)
			nst, err := t.c.Dir.Lstat(rel)
			if err != nil {
				t.c.Index.Set(nil, rel, ids[0])
				return 0
			}
			k := label.KeyOf(nst)
			t.c.Index.Set(&k, rel, ids[0])
			return t.Label(nst, c.Hash, ids[0], c.Label)
		},
		Abort: func() {
			waitStage()
			if rep != nil {
				rep.Abort()
			}
		},
	})
}

// Bind points rel at its new version's record and binds the label l (the
// flow's) to the new content at nst.
func (t *Txn) Bind(rel, hash, id string, nst *syscall.Stat_t, l *label.Label) syscall.Errno {
	var k *label.Key
	if nst != nil {
		key := label.KeyOf(nst)
		k = &key
	}
	t.c.Index.Set(k, rel, id)
	return t.Label(nst, hash, id, l)
}

// Label binds the label l (the flow's) to the content with hash at nst,
// recorded as id.
func (t *Txn) Label(nst *syscall.Stat_t, hash, id string, l *label.Label) syscall.Errno {
	if nst == nil {
		return 0
	}
	b := *l
	b.Hash, b.Record = hash, id
	b.Bind(nst)
	if err := t.c.Labels.Set(label.KeyOf(nst), &b); err != nil {
		return syscall.EIO
	}
	return 0
}

// Quarantine keeps refused content (staged) as a blob and makes r, the
// refusal, durable with the hash of the file it would have replaced, so
// that an approval can check nothing changed since. absent: the file is
// not there for the log (at most the committing handle's empty placeholder
// is, which goes at its release). It returns EACCES (EIO when nothing
// could be kept).
func (t *Txn) Quarantine(r *evidence.Record, rel string, staged *os.File, absent bool) syscall.Errno {
	newHash, err := t.c.Ledger.PutBlobFile(backing.FdPath(staged))
	if err != nil {
		t.c.Ledger.Log.Error().Err(err).Msg("cannot store staged content")
		return syscall.EIO
	}
	base := ""
	if _, err := t.c.Dir.Lstat(rel); err == nil && !absent {
		h, err := t.Store(rel)
		if err != nil {
			t.c.Ledger.Log.Error().Err(err).Str("path", rel).Msg("cannot keep previous version")
			return syscall.EIO
		}
		base = h
	}
	t.c.Ledger.Stats.Denied.Add(1)
	t.c.Ledger.Stats.Quarantined.Add(1)
	r.Type = evidence.TypeQuarantine
	r.Meta.Op = "commit"
	r.Meta.Verdict = "deny"
	r.Payload = &evidence.Payload{OldHash: base, NewHash: newHash, Detail: "quarantined"}
	if _, err := t.c.Ledger.Must(r); err != nil {
		return syscall.EIO
	}
	t.c.Ledger.Log.Info().Str("path", rel).Str("rule", r.Meta.Rule).Str("blob", newHash).Msg("content kept in quarantine")
	return syscall.EACCES
}
