package report

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/snapshot"
)

func markTitle(e *Entry) string {
	r := e.Rec
	var sb strings.Builder
	fmt.Fprintf(&sb, "#%d %s %s", e.Idx, fmtTime(e.Time), r.Type)
	if r.Meta.Verdict != "" {
		fmt.Fprintf(&sb, " %s", r.Meta.Verdict)
	}
	if r.Meta.Rule != "" {
		fmt.Fprintf(&sb, " %s", Printable(r.Meta.Rule))
	}
	fmt.Fprintf(&sb, "\n%s", Printable(r.Principal))
	if r.Meta.Session != "" {
		fmt.Fprintf(&sb, " session %s", Printable(r.Meta.Session))
	}
	if r.Meta.Op != "" || e.Path != "" {
		fmt.Fprintf(&sb, "\n%s %s", Printable(r.Meta.Op), e.Path)
	}
	if len(r.Taint) > 0 {
		fmt.Fprintf(&sb, "\ntaint %s", Printable(strings.Join(r.Taint, "|")))
	}
	if r.Meta.Reason != "" {
		fmt.Fprintf(&sb, "\n%s", Printable(r.Meta.Reason))
	}
	return sb.String()
}

// tickStep picks a round step giving about eight ticks over span.
func tickStep(span time.Duration) time.Duration {
	steps := []time.Duration{
		time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
		20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
		15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
		10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour,
		6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour,
	}
	for _, s := range steps {
		if span/s <= 8 {
			return s
		}
	}
	return span / 8
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Graph is the laid-out provenance graph of a source.
type Graph struct {
	Source        string
	Width, Height int
	Records       int
	Refused       int
	Omitted       int // records left out of the drawing
	Nodes         []GNode
	Edges         []GEdge
	Files         []GFile
}

// GNode is one record box of the graph.
type GNode struct {
	X, Y, W, H          int
	TX, T1, T2, T3      int // text x and baselines
	Class               string
	Line1, Line2, Line3 string
	Title               string
	Href                string // the diff of the change it made, if any
}

// GEdge is one arrow.
type GEdge struct {
	D     string
	Class string
}

// GFile is a guarded file changed downstream of the source.
type GFile struct {
	Path, FirstType, FirstRecord, Principal, Session, Before, Href string
	Versions                                                       int
}

const (
	maxNodes = 400
	nodeW    = 230
	nodeH    = 58
	gapX     = 28
	gapY     = 56
)

type gnode struct {
	idx      int64
	id       string
	typ      string
	path     string
	prin     string
	session  string
	t        time.Time
	refused  bool
	root     bool
	parents  []int // positions in nodes
	treePar  int   // -1 for roots
	layer    int
	pos      float64
	anchor   string
	rule     string
	reason   string
	verdict  string
	taint    string
	children []int
}

// graph lays out the scope of source as a layered DAG, top to bottom: the
// source's own records at the top, each record below every record it
// descends from. Refusals of the sessions in the scope hang under the
// session's last record before them: they are what the source led to but
// the policy stopped.
func graph(b *Bundle, x *snapshot.Index, sc *snapshot.Scope, changeOf map[int64]string) Graph {
	g := Graph{Source: Printable(sc.Source), Records: sc.Records}
	byID := map[string]*Entry{}
	for i := range b.Entries {
		byID[b.Entries[i].ID] = &b.Entries[i]
	}
	var ns []*gnode
	pos := map[string]int{}
	var walk func(n *snapshot.ScopeNode, parent int)
	walk = func(n *snapshot.ScopeNode, parent int) {
		gn := &gnode{idx: n.Idx, id: n.ID, typ: n.Type, path: Printable(n.Path), prin: Printable(n.Principal),
			session: Printable(n.Session), t: n.Time, treePar: parent, root: parent < 0}
		if e := byID[n.ID]; e != nil {
			if e.Path != "" {
				gn.path = e.Path
			}
			fillFromRecord(gn, e)
		}
		p := len(ns)
		ns = append(ns, gn)
		pos[n.ID] = p
		if parent >= 0 {
			gn.parents = append(gn.parents, parent)
		}
		for _, c := range n.Children {
			walk(c, p)
		}
	}
	for _, r := range sc.Roots {
		walk(r, -1)
	}
	// Parents named by the records themselves, beyond the tree edge.
	for _, gn := range ns {
		if e := byID[gn.id]; e != nil {
			for _, pid := range e.Rec.Parents {
				if q, ok := pos[pid]; ok && q != gn.treePar {
					gn.parents = append(gn.parents, q)
				}
			}
		}
	}
	// A record that read the source (a taint, the verdict on the read)
	// descends from the last write of the source before it.
	for _, gn := range ns {
		if !gn.root || gn.typ == evidence.TypeWrite || gn.path == "" {
			continue
		}
		w := -1
		for q, o := range ns {
			if o.root && o.typ == evidence.TypeWrite && o.path == gn.path && o.idx < gn.idx && (w < 0 || o.idx > ns[w].idx) {
				w = q
			}
		}
		if w >= 0 {
			gn.parents = append([]int{w}, gn.parents...)
			gn.treePar = w
		}
	}
	// Refusals of sessions in the scope after they entered it.
	sessFirst := map[string]int64{}
	for _, gn := range ns {
		if gn.session == "" {
			continue
		}
		if f, ok := sessFirst[gn.session]; !ok || gn.idx < f {
			sessFirst[gn.session] = gn.idx
		}
	}
	// Each reached session's nodes in log order, with the last taint
	// record at or before each: a refusal hangs under one of them, found
	// by a binary search rather than a walk of every node.
	type sessNodes struct{ at, lastTaint []int }
	bySess := map[string]*sessNodes{}
	for q, gn := range ns {
		if gn.session == "" {
			continue
		}
		sn := bySess[gn.session]
		if sn == nil {
			sn = &sessNodes{}
			bySess[gn.session] = sn
		}
		sn.at = append(sn.at, q)
	}
	for _, sn := range bySess {
		sort.SliceStable(sn.at, func(i, j int) bool { return ns[sn.at[i]].idx < ns[sn.at[j]].idx })
		last := -1
		for _, q := range sn.at {
			if ns[q].typ == evidence.TypeTaint {
				last = q
			}
			sn.lastTaint = append(sn.lastTaint, last)
		}
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		s := Printable(e.Rec.Meta.Session)
		f, ok := sessFirst[s]
		if !ok || s == "" || e.Idx <= f || !isRefusal(e.Rec) {
			continue
		}
		if _, in := pos[e.ID]; in {
			continue
		}
		// Under the read that tainted the session, else its last record.
		sn := bySess[s]
		k := sort.Search(len(sn.at), func(i int) bool { return ns[sn.at[i]].idx >= e.Idx }) - 1
		if k < 0 {
			continue
		}
		par := sn.at[k]
		if taint := sn.lastTaint[k]; taint >= 0 {
			par = taint
		}
		gn := &gnode{idx: e.Idx, id: e.ID, typ: e.Rec.Type, path: e.Path, prin: Printable(e.Rec.Principal),
			session: s, t: e.Time, treePar: par, refused: true, parents: []int{par}}
		fillFromRecord(gn, e)
		pos[e.ID] = len(ns)
		ns = append(ns, gn)
		g.Refused++
	}
	if len(ns) == 0 {
		return g
	}
	if len(ns) > maxNodes {
		// Keep the first records in log order: parents come before
		// children, so every kept node keeps its edges to kept parents.
		keep := make([]int, len(ns))
		for i := range keep {
			keep[i] = i
		}
		sort.SliceStable(keep, func(i, j int) bool { return ns[keep[i]].idx < ns[keep[j]].idx })
		newPos := map[int]int{}
		var kept []*gnode
		for _, i := range keep[:maxNodes] {
			newPos[i] = len(kept)
			kept = append(kept, ns[i])
		}
		for _, n := range kept {
			var ps []int
			for _, p := range n.parents {
				if q, ok := newPos[p]; ok {
					ps = append(ps, q)
				}
			}
			n.parents = ps
			if q, ok := newPos[n.treePar]; ok {
				n.treePar = q
			} else {
				n.treePar = -1
			}
		}
		g.Omitted = len(ns) - maxNodes
		ns = kept
	}
	// Layers: longest path from a root, in log order (parents come first).
	order := make([]int, len(ns))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return ns[order[i]].idx < ns[order[j]].idx })
	maxLayer := 0
	for _, i := range order {
		n := ns[i]
		for _, p := range n.parents {
			if ns[p].idx < n.idx && ns[p].layer+1 > n.layer {
				n.layer = ns[p].layer + 1
			}
		}
		maxLayer = max(maxLayer, n.layer)
	}
	layers := make([][]int, maxLayer+1)
	for _, i := range order {
		layers[ns[i].layer] = append(layers[ns[i].layer], i)
	}
	// Order each layer by the mean position of its parents (one sweep
	// down), ties in log order, to keep edges short and few crossing.
	for li, layer := range layers {
		for k, i := range layer {
			n := ns[i]
			if li == 0 || len(n.parents) == 0 {
				n.pos = float64(k)
				continue
			}
			s := 0.0
			for _, p := range n.parents {
				s += ns[p].pos
			}
			n.pos = s / float64(len(n.parents))
		}
		sort.SliceStable(layer, func(a, b int) bool { return ns[layer[a]].pos < ns[layer[b]].pos })
		for k, i := range layer {
			ns[i].pos = float64(k)
		}
	}
	widest := 0
	for _, l := range layers {
		widest = max(widest, len(l))
	}
	g.Width = widest*(nodeW+gapX) + gapX
	g.Height = len(layers)*(nodeH+gapY) + gapY/2
	xy := make([][2]int, len(ns))
	for li, layer := range layers {
		off := (g.Width - (len(layer)*(nodeW+gapX) - gapX)) / 2
		for k, i := range layer {
			xy[i] = [2]int{off + k*(nodeW+gapX), gapY/2 + li*(nodeH+gapY)}
		}
	}
	for i, n := range ns {
		x0, y0 := xy[i][0], xy[i][1]
		class := "node"
		switch {
		case n.refused:
			class = "node refused"
		case changeOf[n.idx] != "":
			class = "node change"
		case n.root:
			class = "node root"
		}
		l1 := n.typ
		if n.verdict != "" {
			l1 += " " + n.verdict
		}
		if n.rule != "" {
			l1 += " " + n.rule
		}
		sess := ""
		if n.session != "" {
			sess = " · " + n.session
		}
		gn := GNode{X: x0, Y: y0, W: nodeW, H: nodeH, TX: x0 + 8, T1: y0 + 17, T2: y0 + 34, T3: y0 + 50, Class: class,
			Line1: clip(l1, 32), Line2: clip(orDash(n.path), 32), Line3: clip(n.prin+sess+" · #"+fmt.Sprint(n.idx), 32),
			Href: changeOf[n.idx]}
		gn.Title = fmt.Sprintf("#%d %s %s\n%s %s\npath %s\nrecord %s", n.idx, fmtTime(n.t), n.typ, n.prin, n.session,
			orDash(n.path), n.id)
		if n.taint != "" {
			gn.Title += "\ntaint " + n.taint
		}
		if n.reason != "" {
			gn.Title += "\n" + n.reason
		}
		g.Nodes = append(g.Nodes, gn)
		for k, p := range n.parents {
			px, py := xy[p][0]+nodeW/2, xy[p][1]+nodeH
			cx, cy := x0+nodeW/2, y0
			ec := "edge"
			if n.refused {
				ec = "edge refused"
			} else if k > 0 || p != n.treePar {
				ec = "edge parent"
			}
			mid := (py + cy) / 2
			g.Edges = append(g.Edges, GEdge{D: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", px, py, px, mid, cx, mid, cx, cy-2), Class: ec})
		}
	}
	for _, f := range sc.Files {
		before := "absent"
		if f.First.OldHash != "" {
			before = short(f.First.OldHash)
		}
		g.Files = append(g.Files, GFile{Path: Printable(f.Path), FirstType: f.First.Type, FirstRecord: short(f.First.Record),
			Principal: Printable(f.First.Principal), Session: Printable(orDash(f.First.Session)), Before: before,
			Versions: f.Versions, Href: "#" + changeAnchor(f.First.Idx, f.Path)})
	}
	return g
}

func fillFromRecord(gn *gnode, e *Entry) {
	r := e.Rec
	gn.rule = Printable(r.Meta.Rule)
	gn.reason = Printable(r.Meta.Reason)
	gn.verdict = Printable(r.Meta.Verdict)
	gn.taint = Printable(strings.Join(r.Taint, "|"))
}
