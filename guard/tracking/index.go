package tracking

import (
	"slices"
	"sync"

	"github.com/aerfs/aerfs/guard/label"
)

// Index knows the inodes of guarded files (so that a hard link made under
// a plain name, or before the mount, is still guarded) and the record of
// each guarded path's current version (a change names it as a parent).
type Index struct {
	mu sync.Mutex
	// guarded: every guarded name an inode has been known under, first
	// the oldest; a hard-linked file is decided as the strictest of them.
	guarded map[label.Key][]string
	// over: inodes known under more names than maxNames.
	over map[label.Key]bool
	last map[string]string
}

// maxNames bounds the guarded names kept per inode. An inode known under
// more is marked (Guarded's more): which class a name past the bound had
// is not known, so a caller deciding by them takes the strictest.
const maxNames = 64

// NewIndex is an empty index.
func NewIndex() *Index {
	return &Index{guarded: map[label.Key][]string{}, over: map[label.Key]bool{}, last: map[string]string{}}
}

// Guarded returns the guarded paths the inode k has been known under
// (since its last name went: Forget), and whether it had more than the
// index keeps. A name may have left the inode since; a caller deciding by
// them errs on the strict side.
func (x *Index) Guarded(k label.Key) (names []string, more bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.guarded[k]...), x.over[k]
}

// SetGuarded notes that the inode k holds the guarded file rel.
func (x *Index) SetGuarded(k label.Key, rel string) { x.Set(&k, rel, "") }

// Mark notes that k has a name the index cannot class (one in another
// root): Guarded reports more for it.
func (x *Index) Mark(k label.Key) {
	x.mu.Lock()
	x.over[k] = true
	x.mu.Unlock()
}

// Drop forgets rel as a name of k (it names another file now, or none).
func (x *Index) Drop(k label.Key, rel string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if i := slices.Index(x.guarded[k], rel); i >= 0 {
		x.guarded[k] = slices.Delete(x.guarded[k], i, i+1)
	}
}

// Forget forgets the inode k (its last name is gone).
func (x *Index) Forget(k label.Key) {
	x.mu.Lock()
	delete(x.guarded, k)
	delete(x.over, k)
	x.mu.Unlock()
}

// Last is the id of the record of rel's current version ("" if unknown).
func (x *Index) Last(rel string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.last[rel]
}

// Set notes, for a change recorded as id, that rel's current version is
// the content of the inode k (nil: rel is gone): the inode is guarded
// under rel, and id is the record of rel's version.
func (x *Index) Set(k *label.Key, rel, id string) {
	x.mu.Lock()
	if k != nil && !slices.Contains(x.guarded[*k], rel) {
		if names := x.guarded[*k]; len(names) < maxNames {
			x.guarded[*k] = append(names, rel)
		} else {
			x.over[*k] = true
		}
	}
	if id != "" {
		x.last[rel] = id
	}
	x.mu.Unlock()
}

// SetLast names the record of the current version of each path; an empty
// id forgets them.
func (x *Index) SetLast(id string, paths ...string) {
	x.mu.Lock()
	for _, p := range paths {
		if id == "" {
			delete(x.last, p)
		} else {
			x.last[p] = id
		}
	}
	x.mu.Unlock()
}
