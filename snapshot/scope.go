package snapshot

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// ScopeNode is one record downstream of a source, with the downstream
// records that descend from it.
type ScopeNode struct {
	Idx       int64        `json:"idx"`
	ID        string       `json:"id"`
	Type      string       `json:"type"`
	Path      string       `json:"path,omitempty"`
	Principal string       `json:"principal"`
	Session   string       `json:"session,omitempty"`
	Time      time.Time    `json:"time"`
	Children  []*ScopeNode `json:"children,omitempty"`
}

// ScopeFile is a guarded file changed downstream of a source.
type ScopeFile struct {
	Path string `json:"path"`
	// First is the file's first contaminated version; its OldHash is what
	// StateBefore puts back.
	First Version `json:"first"`
	// Versions counts the file's contaminated versions.
	Versions int `json:"versions"`
}

// Scope is the contamination scope of a source: every record downstream of
// it in the provenance DAG, and every guarded file those records changed.
type Scope struct {
	Source  string       `json:"source"`
	Roots   []*ScopeNode `json:"roots"`   // the source's own records, each the top of a tree
	Records int          `json:"records"` // roots and their descendants
	Files   []ScopeFile  `json:"files"`   // sorted by path
}

// Scope computes the contamination scope of source: a record id (or a
// unique prefix), or a workspace path, whose every record (meta.path,
// payload.from or payload.to equal to it or below it, and every reads
// record listing a file there) is a root. It is ScopeAt with no version.
//
// A record is downstream when it names a downstream record as a parent, or
// when it is a later write, delete, rename or drift of a file that has a
// downstream version (its content descends from the contaminated one even
// if the record did not say so). A restore is downstream only through its
// parents: it installs content the owner chose, and treating it as
// contaminated would spread the scope to every other file it restored. In
// the tree each record hangs under its earliest downstream parent, so it
// appears once; children are in log order.
func (x *Index) Scope(source string) (*Scope, error) { return x.ScopeAt(source, "") }

// ScopeAt is Scope of one version of a path: version is the SHA-256 of
// the content (or a prefix of at least MinPrefix hex digits). The roots are
// the records that made that version of the path or of a file below it,
// and the reads records that list it read at that version, or read at a
// version whose content is unknown (too big to hash, or changed before it
// could be: such a read cannot be ruled out). An empty version is every
// version (Scope).
func (x *Index) ScopeAt(source, version string) (*Scope, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	src := strings.TrimSuffix(strings.TrimPrefix(source, "./"), "/")
	if src == "" {
		return nil, fmt.Errorf("scope: empty source")
	}
	version = strings.ToLower(version)
	if version != "" && !isHexPrefix(version) {
		return nil, fmt.Errorf("scope: version %q is not a SHA-256 (or a prefix of at least %d hex digits) of the content", version, MinPrefix)
	}
	under := func(s string) bool { return s != "" && (s == src || strings.HasPrefix(s, src+"/")) }
	roots := map[int32]bool{}
	var pos int32
	var err error
	if version == "" {
		pos, err = x.resolve(src)
	} else {
		err = ErrNotFound // with a version, the source is a path
	}
	if err == nil {
		roots[pos] = true
	} else if errors.Is(err, ErrAmbiguous) {
		return nil, err
	} else if version == "" {
		for i := range x.recs {
			r := &x.recs[i]
			if under(r.path) || under(r.from) || under(r.to) {
				roots[int32(i)] = true
			}
		}
		// A restore names its files only in its payload.
		for i := range x.recs {
			r := &x.recs[i]
			if r.typ == evidence.TypeRestore {
				for _, v := range x.vers[r.vFirst : r.vFirst+r.vCount] {
					if under(v.path) {
						roots[int32(i)] = true
					}
				}
			}
		}
		// A reads record names the files its reader read.
		for _, p := range x.readersOf(under, func(string) bool { return true }) {
			roots[p] = true
		}
		if len(roots) == 0 {
			return nil, fmt.Errorf("scope: no record or path matches %q: %w", source, ErrNotFound)
		}
	} else {
		for _, v := range x.vers {
			if under(v.path) && v.hash != "" && strings.HasPrefix(v.hash, version) {
				roots[v.rec] = true
			}
		}
		for _, p := range x.readersOf(under, func(h string) bool { return h == "" || strings.HasPrefix(h, version) }) {
			roots[p] = true
		}
		if len(roots) == 0 {
			return nil, fmt.Errorf("scope: no record of %q at version %s (nobody read or wrote that content through the mount): %w", source, version, ErrNotFound)
		}
	}
	start := int32(len(x.recs))
	for p := range roots {
		start = min(start, p)
	}

	sc := &Scope{Source: source}
	nodes := map[int32]*ScopeNode{}
	lastDown := map[string]int32{} // path → latest downstream record that versioned it
	files := map[string]*ScopeFile{}
	for p := start; p < int32(len(x.recs)); p++ {
		r := &x.recs[p]
		parent := int32(-2) // not downstream
		if roots[p] {
			parent = -1
		} else {
			pick := func(q int32) {
				if _, ok := nodes[q]; ok && (parent < 0 || q < parent) {
					parent = q
				}
			}
			for _, q := range r.parents {
				pick(q)
			}
			if r.typ != evidence.TypeRestore {
				for _, v := range x.vers[r.vFirst : r.vFirst+r.vCount] {
					if q, ok := lastDown[v.path]; ok {
						pick(q)
					}
				}
			}
			// A reads record that lists a file a downstream record wrote
			// (a plain file, which has no versions) is downstream of it.
			for _, rd := range x.reads[r.rFirst : r.rFirst+r.rCount] {
				if q, ok := lastDown[rd.path]; ok {
					pick(q)
				}
			}
		}
		if parent == -2 {
			continue
		}
		n := &ScopeNode{Idx: r.idx, ID: r.id, Type: r.typ, Path: r.path, Principal: r.principal,
			Session: r.session, Time: r.t}
		if n.Path == "" && r.vCount == 1 {
			n.Path = x.vers[r.vFirst].path
		}
		if n.Path == "" && r.rCount > 0 {
			n.Path = x.readPath(r, src, parent == -1)
		}
		nodes[p] = n
		sc.Records++
		if parent == -1 {
			sc.Roots = append(sc.Roots, n)
		} else {
			nodes[parent].Children = append(nodes[parent].Children, n)
		}
		if r.typ == evidence.TypeWrite && r.vCount == 0 && r.path != "" {
			lastDown[r.path] = p // a plain file written downstream
		}
		for vi := r.vFirst; vi < r.vFirst+r.vCount; vi++ {
			v := x.vers[vi]
			lastDown[v.path] = p
			if f, ok := files[v.path]; ok {
				f.Versions++
			} else {
				files[v.path] = &ScopeFile{Path: v.path, First: x.version(vi), Versions: 1}
			}
		}
	}
	for _, f := range files {
		sc.Files = append(sc.Files, *f)
	}
	sort.Slice(sc.Files, func(i, j int) bool { return sc.Files[i].Path < sc.Files[j].Path })
	return sc, nil
}

// StateBefore is the current guarded state with every file of the scope
// put back to what it was just before its first contaminated version
// (absent if it did not exist then). Files outside the scope keep their
// current version, so a change made meanwhile by someone else survives.
func (x *Index) StateBefore(sc *Scope) State {
	st := x.Current()
	for _, f := range sc.Files {
		if f.First.OldHash == "" {
			delete(st, f.Path)
		} else {
			st[f.Path] = f.First.OldHash
		}
	}
	return st
}

// readersOf lists the reads records that list a file whose path is
// matched by under, read at a version whose hash is matched by hash.
// Called with x.mu held.
func (x *Index) readersOf(under func(string) bool, hash func(string) bool) []int32 {
	var out []int32
	for i := range x.recs {
		r := &x.recs[i]
		for _, rd := range x.reads[r.rFirst : r.rFirst+r.rCount] {
			if under(rd.path) && hash(rd.hash) {
				out = append(out, int32(i))
				break
			}
		}
	}
	return out
}

// readPath is what a reads record shows as its path in a scope: the
// source's file it lists when it is a root, else its first file and how
// many more it lists.
func (x *Index) readPath(r *rec, src string, root bool) string {
	rs := x.reads[r.rFirst : r.rFirst+r.rCount]
	first := rs[0].path
	if root {
		for _, rd := range rs {
			if rd.path == src || strings.HasPrefix(rd.path, src+"/") {
				first = rd.path
				break
			}
		}
	}
	if len(rs) == 1 {
		return first
	}
	return fmt.Sprintf("%s (+%d read)", first, len(rs)-1)
}

func isHexPrefix(s string) bool {
	if len(s) < MinPrefix || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
