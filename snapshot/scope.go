package snapshot

import (
	"container/heap"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/logindex"
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
	// Written is every plain file (no versions kept) a downstream record
	// wrote, sorted, under every name it had since (renames, links):
	// restore cannot take them back. Among them is the state an agent's
	// client writes in its home (transcripts, its databases), which the
	// client loads again at its next start. A name may hold another file
	// by now: what its label says decides (the label's record).
	Written []string `json:"written,omitempty"`
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
	src := strings.TrimSuffix(strings.TrimPrefix(source, "./"), "/")
	if src == "" {
		return nil, fmt.Errorf("scope: empty source")
	}
	version = strings.ToLower(version)
	if version != "" && !isHexPrefix(version) {
		return nil, fmt.Errorf("scope: version %q is not a SHA-256 (or a prefix of at least %d hex digits) of the content", version, MinPrefix)
	}
	under := func(s string) bool { return s != "" && (s == src || strings.HasPrefix(s, src+"/")) }
	roots := map[int64]bool{}
	var err error
	var pos int64
	if version == "" {
		_, pos, err = x.Resolve(src)
	} else {
		err = ErrNotFound // with a version, the source is a path
	}
	ix := x.ix()
	switch {
	case err == nil:
		roots[pos] = true
	case errors.Is(err, ErrAmbiguous):
		return nil, err
	case !errors.Is(err, ErrNotFound):
		return nil, err
	case version == "":
		recs, err := ix.PathRecords(src)
		if err != nil {
			return nil, err
		}
		for _, p := range recs {
			roots[p] = true
		}
		// A restore names its files only in its payload.
		for _, p := range x.Paths() {
			if under(p) {
				for _, v := range x.History(p) {
					if v.Type == evidence.TypeRestore {
						roots[v.Idx] = true
					}
				}
			}
		}
		// A reads record names the files its reader read.
		rs, err := x.readersOf(ix, src, "")
		if err != nil {
			return nil, err
		}
		for _, p := range rs {
			roots[p] = true
		}
		if len(roots) == 0 {
			return nil, fmt.Errorf("scope: no record or path matches %q: %w", source, ErrNotFound)
		}
	default:
		for _, p := range x.Paths() {
			if !under(p) {
				continue
			}
			for _, v := range x.History(p) {
				if v.Hash != "" && strings.HasPrefix(v.Hash, version) {
					roots[v.Idx] = true
				}
			}
		}
		rs, err := x.readersOf(ix, src, version)
		if err != nil {
			return nil, err
		}
		for _, p := range rs {
			roots[p] = true
		}
		if len(roots) == 0 {
			return nil, fmt.Errorf("scope: no record of %q at version %s (nobody read or wrote that content through the mount): %w", source, version, ErrNotFound)
		}
	}
	return x.walk(ix, src, roots)
}

// walk finds everything downstream of roots, in log order: a record is
// downstream when it names a downstream record as a parent (the index's
// links, read backwards), or when it is a later version of a file that
// has a downstream version (the file's history); a restore only through
// its parents. Only the downstream records and the versions that follow
// them are read, not the rest of the log.
func (x *Index) walk(ix *logindex.Index, src string, roots map[int64]bool) (*Scope, error) {
	sc := &Scope{Source: src}
	nodes := map[int64]*ScopeNode{}
	lastDown := map[string]int64{} // path → latest downstream record that versioned it
	files := map[string]*ScopeFile{}
	written := map[string]bool{} // plain files written downstream, by every name
	hist := map[string][]Version{}
	queue := &idxHeap{}
	queued := map[int64]bool{}
	push := func(p int64) {
		if !queued[p] {
			queued[p] = true
			heap.Push(queue, p)
		}
	}
	next := func(path string, after int64) {
		h, ok := hist[path]
		if !ok {
			h = x.History(path)
			hist[path] = h
		}
		i := sort.Search(len(h), func(i int) bool { return h[i].Idx > after })
		if i < len(h) {
			push(h[i].Idx)
		}
	}
	first := int64(-1)
	for p := range roots {
		push(p)
		if first < 0 || p < first {
			first = p
		}
	}
	// A rename of a directory holding a file written downstream moves
	// it: every rename after the first root is looked at, in log order.
	renames, err := ix.Records(logindex.KindType, evidence.TypeRename)
	if err != nil {
		return nil, err
	}
	for _, p := range renames {
		if p > first {
			push(p)
		}
	}
	for queue.Len() > 0 {
		p := heap.Pop(queue).(int64)
		r, err := ix.Record(p)
		if err != nil {
			return nil, err
		}
		parent := int64(-2) // not downstream
		if roots[p] {
			parent = -1
		} else {
			pick := func(q int64) {
				if _, ok := nodes[q]; ok && (parent < 0 || q < parent) {
					parent = q
				}
			}
			for _, q := range r.Parents {
				pick(q)
			}
			if r.Type != evidence.TypeRestore {
				for _, v := range r.Versions {
					if q, ok := lastDown[v.Path]; ok {
						pick(q)
					}
				}
			}
			// A reads record that lists a file a downstream record wrote
			// (a plain file, which has no versions) is downstream of it.
			if r.Reads > 0 {
				ps, err := ix.ReadPaths(p)
				if err != nil {
					return nil, err
				}
				for _, rp := range ps {
					if q, ok := lastDown[rp]; ok && q < p {
						pick(q)
					}
				}
			}
		}
		if parent == -2 && r.Type == evidence.TypeRename && r.Path != "" {
			for k, q := range lastDown {
				if q < p && (k == r.Path || strings.HasPrefix(k, r.Path+"/")) {
					if _, ok := nodes[q]; ok && (parent < 0 || q < parent) {
						parent = q
					}
				}
			}
		}
		if parent == -2 {
			// A restore that is not downstream: the file's later
			// versions still follow its contaminated one.
			for _, v := range r.Versions {
				if _, ok := lastDown[v.Path]; ok {
					next(v.Path, p)
				}
			}
			continue
		}
		n := &ScopeNode{Idx: p, ID: r.ID.Hex(), Type: r.Type, Path: r.Path, Principal: r.Principal,
			Session: r.Session, Time: nsTime(r.Time)}
		if n.Path == "" && len(r.Versions) == 1 {
			n.Path = r.Versions[0].Path
		}
		if n.Path == "" && r.Reads > 0 {
			ps, err := ix.ReadPaths(p)
			if err != nil {
				return nil, err
			}
			n.Path = readPath(ps, src, parent == -1)
		}
		nodes[p] = n
		sc.Records++
		if parent == -1 {
			sc.Roots = append(sc.Roots, n)
		} else {
			nodes[parent].Children = append(nodes[parent].Children, n)
		}
		if r.Type == evidence.TypeRename && r.Path != "" {
			// What was downstream below the source is downstream at the
			// destination.
			_, lr, err := ix.LogRecord(p)
			if err != nil {
				return nil, err
			}
			if to := lr.Payload.ToPath(); lr.Payload != nil && to != "" && to != r.Path {
				var moved []string
				for k := range lastDown {
					if k == r.Path || strings.HasPrefix(k, r.Path+"/") {
						moved = append(moved, k)
					}
				}
				for _, k := range moved {
					nk := to + k[len(r.Path):]
					lastDown[nk] = p
					if written[k] {
						written[nk] = true
					}
				}
			}
		}
		if r.Type == evidence.TypeWrite && len(r.Versions) == 0 && r.Path != "" {
			// A plain file written downstream: its later readers are.
			written[r.Path] = true
			lastDown[r.Path] = p
			rs, err := ix.ReadsUnder(r.Path)
			if err != nil {
				return nil, err
			}
			for _, rd := range rs[r.Path] {
				if rd.Idx > p {
					push(rd.Idx)
				}
			}
		}
		for _, v := range r.Versions {
			lastDown[v.Path] = p
			if f, ok := files[v.Path]; ok {
				f.Versions++
			} else {
				files[v.Path] = &ScopeFile{Path: v.Path, First: version(v), Versions: 1}
			}
			next(v.Path, p)
		}
		kids, err := ix.Children(p)
		if err != nil {
			return nil, err
		}
		for _, c := range kids {
			push(c)
		}
	}
	for _, f := range files {
		sc.Files = append(sc.Files, *f)
	}
	sort.Slice(sc.Files, func(i, j int) bool { return sc.Files[i].Path < sc.Files[j].Path })
	// A file written downstream under one name is written under every
	// name a link gave it, before or after (a session links a file,
	// writes through the link and removes it).
	if err := x.linkedNames(ix, written); err != nil {
		return nil, err
	}
	for w := range written {
		if _, ok := files[w]; !ok {
			sc.Written = append(sc.Written, w)
		}
	}
	sort.Strings(sc.Written)
	return sc, nil
}

// linkedNames adds to written every name a link record joins to a name
// already in it, until none is added.
func (x *Index) linkedNames(ix *logindex.Index, written map[string]bool) error {
	links, err := ix.Records(logindex.KindOp, "link")
	if err != nil || len(links) == 0 || len(written) == 0 {
		return err
	}
	type pair struct{ from, to string }
	var pairs []pair
	for _, p := range links {
		_, r, err := ix.LogRecord(p)
		if err != nil {
			return err
		}
		if from, to := r.Payload.FromPath(), r.Payload.ToPath(); from != "" && to != "" && r.Payload != nil {
			pairs = append(pairs, pair{from, to})
		}
	}
	for added := true; added; {
		added = false
		for _, pr := range pairs {
			for _, n := range [][2]string{{pr.from, pr.to}, {pr.to, pr.from}} {
				if written[n[0]] && !written[n[1]] {
					written[n[1]] = true
					added = true
				}
			}
		}
	}
	return nil
}

// IDs lists the id of every record in the scope.
func (sc *Scope) IDs() map[string]bool {
	out := map[string]bool{}
	var walk func(ns []*ScopeNode)
	walk = func(ns []*ScopeNode) {
		for _, n := range ns {
			out[n.ID] = true
			walk(n.Children)
		}
	}
	walk(sc.Roots)
	return out
}

// idxHeap is a min-heap of record positions.
type idxHeap []int64

func (h idxHeap) Len() int           { return len(h) }
func (h idxHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idxHeap) Push(v any)        { *h = append(*h, v.(int64)) }
func (h *idxHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
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

// readersOf lists the reads records that list a file at src or under it,
// read at a version whose hash begins with version ("" for any), or read
// at a version whose content is unknown (it cannot be ruled out).
func (x *Index) readersOf(ix *logindex.Index, src, version string) ([]int64, error) {
	rs, err := ix.ReadsUnder(src)
	if err != nil {
		return nil, err
	}
	var out []int64
	for path, l := range rs {
		for _, rd := range l {
			switch {
			case version == "" || !rd.Known:
				out = append(out, rd.Idx)
			case len(version) <= 16:
				if strings.HasPrefix(hex.EncodeToString(rd.Hash8[:]), version) {
					out = append(out, rd.Idx)
				}
			case strings.HasPrefix(version, hex.EncodeToString(rd.Hash8[:])):
				// The index keeps 8 bytes of the hash: the record has it all.
				_, r, err := ix.LogRecord(rd.Idx)
				if err != nil {
					return nil, err
				}
				for _, fr := range r.Payload.Reads {
					if fr.FilePath() == path && strings.HasPrefix(fr.Hash, version) {
						out = append(out, rd.Idx)
						break
					}
				}
			}
		}
	}
	return out, nil
}

// readPath is what a reads record shows as its path in a scope: the
// source's file it lists when it is a root, else its first file and how
// many more it lists.
func readPath(rs []string, src string, root bool) string {
	if len(rs) == 0 {
		return ""
	}
	first := rs[0]
	if root {
		for _, p := range rs {
			if p == src || strings.HasPrefix(p, src+"/") {
				first = p
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
