package fs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/policy"
)

// Label is what aerfs knows of a file's content: who wrote it, what that
// writer had seen, and a binding to the content so that a change made
// behind aerfs's back is noticed.
type Label struct {
	Origin  policy.Principal `json:"origin"`
	Taint   policy.Taint     `json:"taint"`
	Session string           `json:"session,omitempty"`
	Record  string           `json:"record,omitempty"` // evidence record that set it
	// Kind is the file type (S_IFMT) of a labelled symlink, FIFO, socket
	// or device node; zero for a regular file. Such an object is bound by
	// its inode and type, not by a fingerprint: a FIFO's times change with
	// every write that passes through it.
	Kind uint32 `json:"kind,omitempty"`
	// Stamp is the authority class bound to the content when it was
	// written (fs/authority.go); nil: derived from origin and taint.
	Stamp *authority.Stamp `json:"stamp,omitempty"`

	// Binding. Guarded files are bound by content hash; every label also
	// keeps the cheap fingerprint, checked first.
	Hash    string `json:"hash,omitempty"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

// Clean reports whether the label says nothing a reader needs to inherit.
func (l *Label) Clean() bool {
	return l == nil || (l.Taint == 0 && l.Origin.Trusted())
}

func (l *Label) fingerprintMatches(st *syscall.Stat_t) bool {
	return l.Size == st.Size && l.MtimeNs == st.Mtim.Nano() && l.CtimeNs == st.Ctim.Nano()
}

func (l *Label) bindFingerprint(st *syscall.Stat_t) {
	l.Size = st.Size
	l.MtimeNs = st.Mtim.Nano()
	l.CtimeNs = st.Ctim.Nano()
}

// fileKey names a backing inode. Labels follow the inode, so a rename keeps
// a file's label and a hard link shares it.
type fileKey struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

func keyOf(st *syscall.Stat_t) fileKey { return fileKey{Dev: uint64(st.Dev), Ino: st.Ino} }

// LabelStore keeps labels in memory (O(1) lookup by inode) and in an
// append-only journal in the state directory, fsynced before a label change
// is acted on, so labels survive a crash and a remount.
type LabelStore struct {
	mu    sync.RWMutex
	m     map[fileKey]*Label
	f     *os.File
	path  string
	dirty int
}

type labelEntry struct {
	Key   fileKey `json:"k"`
	Label *Label  `json:"l,omitempty"` // nil: deleted
}

// OpenLabels loads the journal at path and compacts it.
func OpenLabels(path string) (*LabelStore, error) {
	s := &LabelStore{m: map[fileKey]*Label{}, path: path}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			var e labelEntry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				// A torn last line after a crash is expected; anything
				// else is corruption and refuses the mount.
				if !sc.Scan() {
					break
				}
				f.Close()
				return nil, fmt.Errorf("%s:%d: corrupt label journal: %v", path, line, err)
			}
			if e.Label == nil {
				delete(s.m, e.Key)
			} else {
				s.m[e.Key] = e.Label
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if err := s.compact(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *LabelStore) compact() error {
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for k, l := range s.m {
		if err := enc.Encode(labelEntry{Key: k, Label: l}); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		d.Sync()
		d.Close()
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f, err = os.OpenFile(s.path, os.O_APPEND|os.O_WRONLY, 0o600)
	s.dirty = 0
	return err
}

// Get returns a copy of the label of the inode, or nil.
func (s *LabelStore) Get(k fileKey) *Label {
	s.mu.RLock()
	l := s.m[k]
	s.mu.RUnlock()
	if l == nil {
		return nil
	}
	c := *l
	return &c
}

// Len is the number of labelled files.
func (s *LabelStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// Set stores l for the inode (nil deletes) and makes it durable.
func (s *LabelStore) Set(k fileKey, l *Label) error {
	b, err := json.Marshal(labelEntry{Key: k, Label: l})
	if err != nil {
		return err
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.m[k]
	if l == nil {
		if prev == nil {
			return nil
		}
		delete(s.m, k)
	} else {
		c := *l
		s.m[k] = &c
	}
	// A write cut short (a full disk) must not leave a torn line in the
	// middle of the journal, where the next entry would be glued to it
	// and the next mount refuse the file: cut it back to where it was.
	end, err := s.f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(b); err != nil {
		if terr := s.f.Truncate(end); terr != nil {
			return fmt.Errorf("%w (and the torn entry could not be cut: %v)", err, terr)
		}
		return err
	}
	s.dirty++
	if s.dirty > 4*len(s.m)+1024 {
		return s.compact()
	}
	// A label that carries taint (or removes one that did) must survive a
	// crash: losing it would clean a file nobody cleaned. A clean label
	// (a trusted writer's guarded file) only saves work; it is synced with
	// the next tainted one, or at close.
	if l.Clean() && prev.Clean() {
		return nil
	}
	return s.f.Sync()
}

// Close flushes and closes the journal.
func (s *LabelStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Sync()
	s.f.Close()
	s.f = nil
	return err
}
