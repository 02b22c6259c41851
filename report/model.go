package report

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/snapshot"
)

// kind of a verdict mark.
func markKind(r *evidence.Record) string {
	switch {
	case r.Type == evidence.TypeQuarantine:
		return "quarantine"
	case r.Meta.Verdict == "deny":
		return "deny"
	case r.Meta.Verdict == "allow":
		return "allow"
	}
	return "event"
}

// weight is how many events a record stands for: a refusal folded with
// the ones a caller repeated within a minute counts them all (meta.folded).
func weight(r *evidence.Record) int {
	if r.Meta.Folded > 1 {
		return r.Meta.Folded
	}
	return 1
}

// isRefusal reports whether a record says a request was refused or held.
func isRefusal(r *evidence.Record) bool {
	k := markKind(r)
	return k == "deny" || k == "quarantine"
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// laneKey is the timeline lane of a record: its session, or the principal
// acting outside every session.
func laneKey(r *evidence.Record) (key, label string) {
	if r.Meta.Session != "" {
		return "s:" + r.Meta.Session, "session " + Printable(r.Meta.Session) + " · " + Printable(r.Principal)
	}
	return "p:" + r.Principal, "no session · " + Printable(r.Principal)
}

// RefusalGroup is one row of the refusals table.
type RefusalGroup struct {
	Rule, Principal, Kind string
	Count                 int
	Paths                 []string
	MorePaths             int
	Sessions              []string
	First, Last           string
	Reason                string
}

func refusalGroups(b *Bundle) []RefusalGroup {
	type key struct{ rule, principal, kind string }
	m := map[key]*RefusalGroup{}
	var order []key
	seenPath := map[key]map[string]bool{}
	seenSess := map[key]map[string]bool{}
	for _, e := range b.Entries {
		r := e.Rec
		if !isRefusal(r) {
			continue
		}
		k := key{r.Meta.Rule, r.Principal, markKind(r)}
		g, ok := m[k]
		if !ok {
			g = &RefusalGroup{Rule: Printable(orDash(r.Meta.Rule)), Principal: Printable(r.Principal), Kind: k.kind,
				First: fmtTime(e.Time), Reason: Printable(r.Meta.Reason)}
			m[k] = g
			order = append(order, k)
			seenPath[k], seenSess[k] = map[string]bool{}, map[string]bool{}
		}
		g.Count += weight(r)
		g.Last = fmtTime(e.Time)
		if p := e.Path; p != "" && !seenPath[k][p] {
			seenPath[k][p] = true
			if len(g.Paths) < 8 {
				g.Paths = append(g.Paths, p)
			} else {
				g.MorePaths++
			}
		}
		if s := r.Meta.Session; s != "" && !seenSess[k][s] && len(g.Sessions) < 8 {
			seenSess[k][s] = true
			g.Sessions = append(g.Sessions, Printable(s))
		}
	}
	out := make([]RefusalGroup, 0, len(order))
	for _, k := range order {
		out = append(out, *m[k])
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].Principal < out[j].Principal
	})
	return out
}

// Refusal is one refused or held request.
type Refusal struct {
	Idx                                      int64
	Time, Kind, Rule, Principal, Session, Op string
	Path, Reason, Taint, ID                  string
	Folded                                   int // the refusals this record stands for, when more than one
}

// refusals is the newest n refused or held requests, newest first, and
// how many came before them.
func refusals(b *Bundle, n int) ([]Refusal, int) {
	var out []Refusal
	total := 0
	for i := len(b.Entries) - 1; i >= 0; i-- {
		e := &b.Entries[i]
		r := e.Rec
		if !isRefusal(r) {
			continue
		}
		total += weight(r)
		if len(out) == n {
			continue
		}
		out = append(out, Refusal{Idx: e.Idx, Time: fmtTime(e.Time), Kind: markKind(r), Rule: Printable(orDash(r.Meta.Rule)),
			Principal: Printable(r.Principal), Session: Printable(orDash(r.Meta.Session)), Op: Printable(r.Meta.Op),
			Path: e.Path, Reason: Printable(r.Meta.Reason), Taint: Printable(strings.Join(r.Taint, "|")), ID: short(e.ID), Folded: r.Meta.Folded})
	}
	return out, total - len(out)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// Change is one guarded change with its diff.
type Change struct {
	Anchor                               string
	Idx                                  int64
	Time, Type, Path, Principal, Session string
	Rule, Record                         string
	Lines                                []DiffLine
	Note                                 string // why there is no diff

	// what to compare: the change's path, its old and new content
	path, aName, bName string
	oldHash, newHash   string
}

// DiffLine is one line of a unified diff and its class.
type DiffLine struct {
	Class, Text string
}

// maxDiff bounds the diff text shown for one change.
const maxDiff = 256 << 10

// maxDiffsTotal bounds the diff text of the whole page: past it, the
// older changes shown say where to read their diff instead.
const maxDiffsTotal = 4 << 20

func changeAnchor(idx int64, path string) string {
	return fmt.Sprintf("change-%d-%s", idx, Fingerprint(path)[:8])
}

// changes lists every guarded change in log order, without diffs: the
// versions the log records, then the writes held in quarantine (their diff
// is what approving them would do).
func changes(b *Bundle, x *snapshot.Index) []Change {
	byIdx := map[int64]*Entry{}
	for i := range b.Entries {
		byIdx[b.Entries[i].Idx] = &b.Entries[i]
	}
	var out []Change
	for _, p := range x.Paths() {
		for _, v := range x.History(p) {
			c := Change{Anchor: changeAnchor(v.Idx, p), Idx: v.Idx, Time: fmtTime(v.Time), Type: v.Type,
				Path: Printable(p), Principal: Printable(v.Principal), Session: Printable(orDash(v.Session)),
				Record: short(v.Record), path: p, aName: p, bName: p, oldHash: v.OldHash, newHash: v.Hash}
			if e := byIdx[v.Idx]; e != nil {
				c.Rule = Printable(orDash(e.Rec.Meta.Rule))
			}
			if v.OldHash == "" {
				c.aName = "/dev/null"
			}
			if v.Hash == "" {
				c.bName = "/dev/null"
			}
			out = append(out, c)
		}
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		r := e.Rec
		if r.Type != evidence.TypeQuarantine || r.Payload == nil || r.Payload.NewHash == "" {
			continue
		}
		c := Change{Anchor: changeAnchor(e.Idx, e.Path), Idx: e.Idx, Time: fmtTime(e.Time), Type: "quarantined (not applied)",
			Path: e.Path, Principal: Printable(r.Principal), Session: Printable(orDash(r.Meta.Session)),
			Rule: Printable(orDash(r.Meta.Rule)), Record: short(e.ID),
			path: r.Meta.Path, aName: r.Meta.Path, bName: r.Meta.Path, oldHash: r.Payload.OldHash, newHash: r.Payload.NewHash}
		if r.Payload.OldHash == "" {
			c.aName = "/dev/null"
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Idx < out[j].Idx })
	return out
}

// shownChanges picks the changes the page shows with their diff: the
// newest n, and every one another part of the page links to (want, by
// anchor), newest first within the page's budget. It returns them in log
// order and how many changes are not shown.
func shownChanges(b *Bundle, all []Change, n int, want map[string]bool) ([]Change, int) {
	pick := make([]bool, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		if len(all)-i <= n || want[all[i].Anchor] {
			pick[i] = true
		}
	}
	budget := maxDiffsTotal
	var out []Change
	for i := len(all) - 1; i >= 0; i-- {
		if !pick[i] {
			continue
		}
		c := all[i]
		if budget <= 0 {
			c.Note = fmt.Sprintf("diff not shown: the page holds %d MiB of diffs already; aerfs diff %s shows it", maxDiffsTotal>>20, c.Path)
		} else {
			old, okOld := b.content(c.oldHash)
			cur, okNew := b.content(c.newHash)
			if !okOld || !okNew {
				c.Note = "content not in the bundle"
			} else {
				c.Lines, c.Note = diff(c.aName, c.bName, old, cur)
				for _, l := range c.Lines {
					budget -= len(l.Text) + 30
				}
			}
		}
		out = append(out, c)
	}
	slices.Reverse(out)
	return out, len(all) - len(out)
}

// maxDiffInput bounds the content compared for one change: the diff's
// cost grows with the size of what differs.
const maxDiffInput = 8 << 20

// diff is the unified diff of one change as lines, and a note when there
// is none to show or it was cut.
func diff(aName, bName string, a, b []byte) ([]DiffLine, string) {
	if len(a)+len(b) > maxDiffInput {
		return nil, fmt.Sprintf("content too large to compare here (%d and %d bytes); use aerfs diff", len(a), len(b))
	}
	d := snapshot.Diff(aName, bName, a, b)
	note := ""
	switch {
	case d == "":
		note = "content unchanged"
	case len(d) > maxDiff:
		d, note = d[:maxDiff], "diff cut at 256 KiB"
	}
	return diffLines(d), note
}

// content returns the blob with hash; "" is an absent file.
func (b *Bundle) content(hash string) ([]byte, bool) {
	if hash == "" {
		return nil, true
	}
	return b.Blob(hash)
}

func diffLines(d string) []DiffLine {
	var out []DiffLine
	for _, l := range strings.SplitAfter(d, "\n") {
		if l == "" {
			continue
		}
		l = strings.TrimSuffix(l, "\n")
		c := "ctx"
		switch {
		case strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---"):
			c = "hdr"
		case strings.HasPrefix(l, "@@"):
			c = "hunk"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		case strings.HasPrefix(l, `\`):
			c = "hunk"
		}
		out = append(out, DiffLine{Class: c, Text: printableText(l, true)})
	}
	return out
}

// index builds the snapshot index of the bundle's records.
func index(b *Bundle) *snapshot.Index {
	x := snapshot.New()
	for i := range b.Entries {
		e := &b.Entries[i]
		x.Add(e.Idx, e.ID, e.Rec)
	}
	return x
}

// The default source is looked for among the newest tainted sources
// only, within a time budget: computing a source's scope walks the
// provenance graph, and on a long log one walk takes seconds.
const (
	maxSourceCandidates = 12
	sourceBudget        = 5 * time.Second
)

// DefaultSource picks the source with the largest contamination scope:
// among the newest paths written with a taint (maxSourceCandidates, as
// many as sourceBudget allows, at least one), the one whose scope changed
// the most guarded files, then has the most records. "" when there is
// none.
func DefaultSource(b *Bundle, x *snapshot.Index) string {
	src, _ := pickSource(b, x)
	return src
}

// pickSource is DefaultSource with the chosen source's scope.
func pickSource(b *Bundle, x *snapshot.Index) (string, *snapshot.Scope) {
	seen := map[string]bool{}
	var cands []string
	for i := len(b.Entries) - 1; i >= 0 && len(cands) < maxSourceCandidates; i-- {
		r := b.Entries[i].Rec
		if r.Type != evidence.TypeWrite || len(r.Taint) == 0 || r.Meta.Path == "" || seen[r.Meta.Path] {
			continue
		}
		seen[r.Meta.Path] = true
		cands = append(cands, r.Meta.Path)
	}
	start := time.Now()
	best, bestFiles, bestRecs := "", -1, -1
	var bestScope *snapshot.Scope
	for i, c := range cands {
		if i > 0 && time.Since(start) > sourceBudget {
			break
		}
		sc, err := x.Scope(c)
		if err != nil {
			continue
		}
		if len(sc.Files) > bestFiles || (len(sc.Files) == bestFiles && sc.Records > bestRecs) {
			best, bestFiles, bestRecs, bestScope = c, len(sc.Files), sc.Records, sc
		}
	}
	return best, bestScope
}
