package logindex

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// testLog is a real evidence log whose records a random walk over a small
// workspace makes: every kind of record the index folds, in the shapes the
// daemon writes them.
type testLog struct {
	t     testing.TB
	dir   string
	log   *evidence.Log
	rnd   *rand.Rand
	clock time.Time
	n     int
	ids   []string
	cur   map[string]string // guarded path → hash
	last  map[string]string // guarded path → its version's record
	reads map[string]string // session → newest reads record
	quar  [][3]string       // quarantine records not decided: id, path, hash
	sess  []string
	blobs []string
}

// testKey is the test vectors' note key: fixtures made with it are
// reproducible.
func testKey(t testing.TB) (string, string) {
	sk, err := os.ReadFile("../evidence/testdata/vectors/test-key.private")
	if err != nil {
		t.Fatal(err)
	}
	vk, err := os.ReadFile("../evidence/testdata/vectors/test-key.pub")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(sk)), strings.TrimSpace(string(vk))
}

func newTestLog(t testing.TB, dir string, seed uint64) *testLog {
	t.Helper()
	sk, vk := testKey(t)
	if err := evidence.InitWithKey(dir, sk, vk); err != nil {
		t.Fatal(err)
	}
	l, err := evidence.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLog{t: t, dir: dir, log: l, rnd: rand.New(rand.NewPCG(seed, 3)),
		clock: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		cur:   map[string]string{}, last: map[string]string{}, reads: map[string]string{}}
	t.Cleanup(func() { tl.log.Close() })
	for i := 0; i < 6; i++ {
		tl.blobs = append(tl.blobs, tl.blob(fmt.Sprintf("content %d\n", i)))
	}
	return tl
}

func (tl *testLog) blob(s string) string {
	h, err := tl.log.PutBlob([]byte(s))
	if err != nil {
		tl.t.Fatal(err)
	}
	return h
}

func (tl *testLog) add(r *evidence.Record) string {
	tl.t.Helper()
	tl.clock = tl.clock.Add(time.Second)
	r.Meta.Time = evidence.FormatTime(tl.clock)
	if r.Principal == "" {
		r.Principal = "USER"
	}
	id, err := tl.log.Append(r)
	if err != nil {
		tl.t.Fatalf("append %s: %v", r.Type, err)
	}
	tl.ids = append(tl.ids, id)
	tl.n++
	return id
}

var paths = []string{"MEMORY.md", "AGENTS.md", "memory/a.md", "memory/b.md", "memory/deep/c.md", "skills/x/SKILL.md", "mem2/z.md", "memory/\xff.md"}

func (tl *testLog) pick(l []string) string { return l[tl.rnd.IntN(len(l))] }

// step appends one random record (or a few, for a change that takes
// several).
func (tl *testLog) step() {
	sess := ""
	if len(tl.sess) > 0 && tl.rnd.IntN(3) > 0 {
		sess = tl.pick(tl.sess)
	}
	parents := func(more ...string) []string {
		var ps []string
		if r := tl.reads[sess]; r != "" && sess != "" {
			ps = append(ps, r)
		}
		for _, m := range more {
			if m != "" && !contains(ps, m) {
				ps = append(ps, m)
			}
		}
		return ps
	}
	p := tl.pick(paths)
	switch tl.rnd.IntN(20) {
	case 0:
		tl.add(&evidence.Record{Type: evidence.TypeMount, Principal: "SYS", Meta: evidence.Meta{Path: "/ws"}})
	case 1:
		tl.add(&evidence.Record{Type: evidence.TypeUnmount, Principal: "SYS", Meta: evidence.Meta{Path: "/ws"}})
	case 2:
		var files []evidence.FileState
		for _, q := range sortedKeys(tl.cur) {
			files = append(files, evidence.FileState{Path: q, Hash: tl.cur[q]})
		}
		pl := &evidence.Payload{Detail: fmt.Sprintf("snap %d", tl.n)}
		if len(files) > 0 {
			pl.Files = files
		}
		tl.add(&evidence.Record{Type: evidence.TypeSnapshot, Principal: "SYS", Payload: pl})
	case 3, 4, 5:
		h := tl.pick(tl.blobs)
		id := tl.add(&evidence.Record{Type: evidence.TypeWrite, Parents: parents(tl.last[p]),
			Meta:    evidence.Meta{Path: p, Session: sess, Verdict: "allow"},
			Payload: &evidence.Payload{OldHash: tl.cur[p], NewHash: h}})
		tl.cur[p], tl.last[p] = h, id
	case 6:
		tl.add(&evidence.Record{Type: evidence.TypeWrite, Principal: "WEB", Taint: []string{"WEB_DERIVED"}, Parents: parents(),
			Meta: evidence.Meta{Path: "downloads/" + fmt.Sprint(tl.rnd.IntN(5)) + ".html", Session: sess}})
	case 7:
		if tl.cur[p] != "" {
			id := tl.add(&evidence.Record{Type: evidence.TypeDelete, Parents: parents(tl.last[p]),
				Meta: evidence.Meta{Path: p, Session: sess}, Payload: &evidence.Payload{OldHash: tl.cur[p]}})
			delete(tl.cur, p)
			tl.last[p] = id
		}
	case 8:
		// A directory or a file renamed.
		from := tl.pick([]string{"memory", "mem2", "MEMORY.md", "memory/deep"})
		to := tl.pick([]string{"mem2", "memory", "memory/deep", "AGENTS.md"})
		if from == to || strings.HasPrefix(to, from+"/") || strings.HasPrefix(from, to+"/") {
			return
		}
		tl.add(&evidence.Record{Type: evidence.TypeRename, Parents: parents(),
			Meta: evidence.Meta{Path: from, Session: sess}, Payload: &evidence.Payload{From: from, To: to}})
		for q, h := range tl.cur {
			if q == from || strings.HasPrefix(q, from+"/") {
				delete(tl.cur, q)
				tl.cur[to+strings.TrimPrefix(q, from)] = h
			}
		}
	case 9:
		var files []evidence.FileState
		for _, q := range []string{p, tl.pick(paths)} {
			if len(files) == 1 && files[0].Path == q {
				continue
			}
			h := tl.pick(tl.blobs)
			files = append(files, evidence.FileState{Path: q, OldHash: tl.cur[q], Hash: h})
		}
		id := tl.add(&evidence.Record{Type: evidence.TypeRestore, Meta: evidence.Meta{Op: "restore"}, Payload: &evidence.Payload{Files: files}})
		for _, f := range files {
			tl.cur[f.FilePath()], tl.last[f.FilePath()] = f.Hash, id
		}
	case 10:
		h := tl.pick(tl.blobs)
		tl.add(&evidence.Record{Type: evidence.TypeDrift, Principal: "EXTERNAL", Meta: evidence.Meta{Path: p},
			Payload: &evidence.Payload{OldHash: tl.cur[p], NewHash: h}})
		tl.cur[p] = h
	case 11:
		h := tl.pick(tl.blobs)
		q := tl.add(&evidence.Record{Type: evidence.TypeQuarantine, Principal: "WEB", Parents: parents(),
			Meta:    evidence.Meta{Path: p, Session: sess, Verdict: "deny", Rule: "R3-principal"},
			Payload: &evidence.Payload{OldHash: tl.cur[p], NewHash: h}})
		tl.quar = append(tl.quar, [3]string{q, p, h})
	case 12:
		if len(tl.quar) == 0 {
			return
		}
		q, qp, qh := tl.quar[0][0], tl.quar[0][1], tl.quar[0][2]
		tl.quar = tl.quar[1:]
		if tl.rnd.IntN(2) == 0 {
			tl.add(&evidence.Record{Type: evidence.TypeReject, Parents: []string{q}, Meta: evidence.Meta{Op: "reject"}})
			return
		}
		a := tl.add(&evidence.Record{Type: evidence.TypeApprove, Parents: []string{q}, Meta: evidence.Meta{Op: "approve"}})
		// The approved content arrives with the write that carries it.
		id := tl.add(&evidence.Record{Type: evidence.TypeWrite, Parents: []string{a},
			Meta: evidence.Meta{Path: qp, Op: "approve"}, Payload: &evidence.Payload{OldHash: tl.cur[qp], NewHash: qh}})
		tl.cur[qp], tl.last[qp] = qh, id
	case 13, 14:
		if sess == "" {
			sess = tl.pick(append(tl.sess, "s-new"))
		}
		var rs []evidence.FileRead
		for j := 0; j < 1+tl.rnd.IntN(3); j++ {
			fr := evidence.FileRead{}
			fr.SetPath(tl.pick(append(paths, "notes/page.md", "notes/other.md")))
			if h := tl.cur[fr.FilePath()]; h != "" {
				fr.Hash = h
			} else {
				fr.Fp = fmt.Sprintf("2049:%d:10:1:1", tl.rnd.IntN(100))
			}
			rs = append(rs, fr)
		}
		var ps []string
		if r := tl.reads[sess]; r != "" {
			ps = []string{r}
		}
		tl.reads[sess] = tl.add(&evidence.Record{Type: evidence.TypeReads, Parents: ps,
			Meta: evidence.Meta{Op: "read", Session: sess}, Payload: &evidence.Payload{Reads: rs}})
	case 15:
		id := fmt.Sprintf("s%d", tl.rnd.IntN(8))
		parent := ""
		if len(tl.sess) > 0 && tl.rnd.IntN(3) == 0 {
			parent = tl.pick(tl.sess)
		}
		if parent == id {
			parent = ""
		}
		tl.add(&evidence.Record{Type: evidence.TypeSessionStart, Principal: tl.pick([]string{"USER", "WEB", "TOOL_AUTH"}),
			Taint: [][]string{nil, {"WEB_DERIVED"}}[tl.rnd.IntN(2)],
			Meta:  evidence.Meta{Session: id, Op: "register", Verdict: "allow"},
			Payload: &evidence.Payload{From: parent, To: fmt.Sprintf("c%d", tl.n),
				Detail: "sandbox: landlock" + tl.pick([]string{"", "; agent: claude-code"})}})
		if !contains(tl.sess, id) {
			tl.sess = append(tl.sess, id)
		}
	case 16:
		if sess != "" {
			tl.add(&evidence.Record{Type: evidence.TypeTaint, Taint: []string{tl.pick([]string{"WEB_DERIVED", "TOOL_OUTPUT", "SECRET_RISK"})},
				Meta: evidence.Meta{Session: sess, Reason: "declared"}})
		}
	case 17:
		if sess != "" {
			tl.add(&evidence.Record{Type: evidence.TypeSessionEnd, Meta: evidence.Meta{Session: sess, Reason: "session root exited"}})
		}
	case 18:
		tl.add(&evidence.Record{Type: evidence.TypeGC, Meta: evidence.Meta{Op: "gc", Rule: "RO-owner"},
			Payload: &evidence.Payload{Pruned: []string{fmt.Sprintf("%064x", tl.n)}, Detail: "keep-last 1"}})
	case 19:
		tl.add(&evidence.Record{Type: evidence.TypeVerdict, Principal: "TOOL_AUTH",
			Meta:    evidence.Meta{Path: p, Op: "attest", Verdict: "allow", Rule: "AU4-attest", Session: sess},
			Payload: &evidence.Payload{Detail: "sha256=" + tl.pick(tl.blobs) + ` domain="finance"`}})
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// steps appends n random records and makes them visible to readers.
func (tl *testLog) steps(n int) {
	for i := 0; i < n; i++ {
		tl.step()
	}
	if err := tl.log.Flush(); err != nil {
		tl.t.Fatal(err)
	}
}

// smallIndex makes the keeper write and merge tiny segments.
func smallIndex(t testing.TB) {
	old := [3]int64{minWindow, maxWindow, segCap}
	minWindow, maxWindow, segCap = 4, 16, 64
	t.Cleanup(func() { minWindow, maxWindow, segCap = old[0], old[1], old[2] })
}

// answers is everything an index answers, for comparison.
type answers struct {
	Through   int64
	History   map[string][]Version
	Paths     []string
	Current   map[string]Hash
	Pending   []Pending
	Mounts    []Mount
	Snapshots []Snapshot
	PathRecs  map[string][]int64
	SessRecs  map[string][]int64
	TypeRecs  map[string][]int64
	Attests   []int64
	Children  map[int64][]int64
	Records   []Rec
	Reads     map[string][]Read
	Sessions  []Session
	Cgroups   map[string]string
	Pruned    []bool
	IDs       map[string][]int64
}

func collect(t testing.TB, x *Index, tl *testLog) answers {
	t.Helper()
	a := answers{Through: x.Through(), History: map[string][]Version{}, Paths: x.Paths(), Current: x.Current(),
		Pending: x.Pending(), Mounts: x.Mounts(), Snapshots: x.Snapshots(), PathRecs: map[string][]int64{},
		SessRecs: map[string][]int64{}, TypeRecs: map[string][]int64{}, Children: map[int64][]int64{},
		Reads: map[string][]Read{}, Cgroups: map[string]string{}, IDs: map[string][]int64{}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range append(paths, "notes/page.md", "mem2", "memory", "memory/deep", "downloads") {
		vs, err := x.History(p)
		must(err)
		a.History[p] = vs
		l, err := x.PathRecords(p)
		must(err)
		a.PathRecs[p] = l
		rs, err := x.ReadsUnder(p)
		must(err)
		for k, v := range rs {
			a.Reads[p+"|"+k] = v
		}
	}
	for _, s := range append(tl.sess, "s-new", "nobody") {
		l, err := x.Records(KindSession, s)
		must(err)
		a.SessRecs[s] = l
	}
	for _, typ := range evidence.RecordTypes() {
		l, err := x.Records(KindType, typ)
		must(err)
		a.TypeRecs[typ] = l
	}
	l, err := x.Records(KindOp, "attest")
	must(err)
	a.Attests = l
	for i := int64(0); i < x.Through(); i++ {
		r, err := x.Record(i)
		must(err)
		a.Records = append(a.Records, r)
		c, err := x.Children(i)
		must(err)
		if len(c) > 0 {
			a.Children[i] = c
		}
		if i%7 == 0 {
			a.Pruned = append(a.Pruned, x.Pruned(fmt.Sprintf("%064x", i)))
		}
	}
	must(x.EachSession(func(s *Session) error {
		a.Sessions = append(a.Sessions, *s)
		for _, c := range s.Cgroups {
			if got, ok := x.SessionByCgroup(c); ok {
				a.Cgroups[c] = got.ID
			}
		}
		return nil
	}))
	for _, id := range tl.ids[:min(len(tl.ids), 40)] {
		l, err := x.FindID(id[:8])
		must(err)
		a.IDs[id[:8]] = l
	}
	return a
}

// sameAnswers compares two indexes' answers field by field.
func sameAnswers(t testing.TB, what string, got, want answers) {
	t.Helper()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := 0; i < gv.NumField(); i++ {
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if !reflect.DeepEqual(normal(g), normal(w)) {
			t.Fatalf("%s: %s differs:\n got  %v\n want %v", what, gv.Type().Field(i).Name, trunc(g), trunc(w))
		}
	}
}

// normal makes empty and nil slices and maps alike.
func normal(v any) any {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map:
		if rv.Len() == 0 {
			return nil
		}
	}
	switch x := v.(type) {
	case map[string][]Version:
		out := map[string][]Version{}
		for k, l := range x {
			if len(l) > 0 {
				out[k] = l
			}
		}
		return out
	case map[string][]int64:
		out := map[string][]int64{}
		for k, l := range x {
			if len(l) > 0 {
				out[k] = l
			}
		}
		return out
	case []Rec:
		out := make([]Rec, len(x))
		for i, r := range x {
			if len(r.Parents) == 0 {
				r.Parents = nil
			} else {
				r.Parents = append([]int64(nil), r.Parents...)
				sort.Slice(r.Parents, func(i, j int) bool { return r.Parents[i] < r.Parents[j] })
			}
			if len(r.Versions) == 0 {
				r.Versions = nil
			}
			out[i] = r
		}
		return out
	case []Session:
		out := make([]Session, len(x))
		for i, s := range x {
			if len(s.Taint) == 0 {
				s.Taint = nil
			}
			if len(s.Cgroups) == 0 {
				s.Cgroups = nil
			}
			out[i] = s
		}
		return out
	}
	return v
}

func trunc(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
