package label

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/aerfs/aerfs/authority"
)

// Store keeps labels in memory (O(1) lookup by inode) and in an
// append-only journal in the state directory, fsynced before a label change
// is acted on, so labels survive a crash and a remount.
type Store struct {
	mu sync.RWMutex
	m  map[Key]*Label
	// versions keeps, by content hash, the labels guarded content had
	// when it was published (those that are not the owner's clean act):
	// content put back by a restore or a rollback gets its version's
	// label, not the owner's.
	versions map[string][]*Label
	f        *os.File
	path     string
	dirty    int
	// behind: a change is in memory that the journal could not take (a
	// full disk); the next change, or Close, rewrites the journal whole.
	behind bool
}

type entry struct {
	Key   Key    `json:"k"`
	Label *Label `json:"l,omitempty"` // nil: deleted
	// Version: the entry is a version's label, by content hash (Key is
	// zero).
	Version string `json:"v,omitempty"`
}

// maxVersionLabels bounds the labels kept for one content hash (the same
// bytes written by different writers); the first ones are kept.
const maxVersionLabels = 8

// Open loads the journal at path and compacts it.
func Open(path string) (*Store, error) {
	s := &Store{m: map[Key]*Label{}, versions: map[string][]*Label{}, path: path}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			var e entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				// A torn last line after a crash is expected; anything
				// else is corruption and refuses the mount.
				if !sc.Scan() {
					break
				}
				f.Close()
				return nil, fmt.Errorf("%s:%d: corrupt label journal: %v", path, line, err)
			}
			if e.Version != "" {
				if e.Label != nil {
					s.addVersion(e.Version, e.Label)
				}
			} else if e.Label == nil {
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

func (s *Store) compact() error {
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for k, l := range s.m {
		if err := enc.Encode(entry{Key: k, Label: l}); err != nil {
			f.Close()
			return err
		}
	}
	for h, ls := range s.versions {
		for _, l := range ls {
			if err := enc.Encode(entry{Version: h, Label: l}); err != nil {
				f.Close()
				return err
			}
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
func (s *Store) Get(k Key) *Label {
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
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// addVersion notes l as a label of the content with hash h; it reports
// whether it is new.
func (s *Store) addVersion(h string, l *Label) bool {
	ls := s.versions[h]
	if len(ls) >= maxVersionLabels {
		return false
	}
	for _, o := range ls {
		if Same(o, l) {
			return false
		}
	}
	c := *l
	s.versions[h] = append(ls, &c)
	return true
}

// Versions returns copies of the labels the content with hash h had when
// it was published under a guarded name (none: the owner's clean act
// content, or content aerfs never published).
func (s *Store) Versions(h string) []*Label {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Label
	for _, l := range s.versions[h] {
		c := *l
		out = append(out, &c)
	}
	return out
}

// Set stores l for the inode (nil deletes) and makes it durable. A label
// bound to a content hash that is not the owner's clean act is kept for
// that content too (Versions).
func (s *Store) Set(k Key, l *Label) error {
	b, err := json.Marshal(entry{Key: k, Label: l})
	if err != nil {
		return err
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if l != nil && l.Hash != "" && !(l.Clean() && StampOf(l).Class == authority.Act) && s.addVersion(l.Hash, l) {
		v, err := json.Marshal(entry{Version: l.Hash, Label: l})
		if err != nil {
			return err
		}
		b = append(append(v, '\n'), b...)
	}
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
	if s.behind {
		// The journal lacks a change it could not take: written whole
		// from memory (this one included) once there is room again.
		if err := s.compact(); err != nil {
			return err
		}
		s.behind = false
		return nil
	}
	// A write cut short (a full disk) must not leave a torn line in the
	// middle of the journal, where the next entry would be glued to it
	// and the next mount refuse the file: cut it back to where it was.
	end, err := s.f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(b); err != nil {
		s.behind = true
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
	if err := s.f.Sync(); err != nil {
		s.behind = true
		return err
	}
	return nil
}

// Close flushes and closes the journal.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	if s.behind {
		if err := s.compact(); err != nil {
			return fmt.Errorf("%s: labels kept in memory could not be written: %w", s.path, err)
		}
		s.behind = false
	}
	err := s.f.Sync()
	s.f.Close()
	s.f = nil
	return err
}
