package authority

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aerfs/aerfs/policy"
)

// The bounded explorer drives the real Monitor (the state machine fs uses)
// through every trace up to a depth over the actions of the seed's model,
// with ghost state recording the true origin of every content, and checks
// the seed's Sec invariant in every reachable state:
//
//	no content derived from an untrusted origin acts without k
//	distinct-domain trusted attestations of that exact content, or a fresh
//	unspent owner token for exactly that file, content and action.
//
// The harness plays fs: it keeps each file's stamp as the label store does,
// reports reads and writes to the monitor and asks Authorize at every act.
// Writers' taint bits are left clean on purpose, so the monitor's own read
// floor (M2) is what has to carry untrusted origin through copies,
// paraphrases and echoes.

const (
	xFiles    = 3
	xSessions = 2 // agent sessions s1, s2
	xK        = 2
)

var xPaths = [xFiles]string{"memory/f0.md", "skills/f1.sh", "memory/f2.md"}

// Attestors: two trusted in domain D1, one trusted in D2, one untrusted
// (a WEB principal, registered) in D3.
type xAttestor struct {
	name    string
	domain  string
	trusted bool
}

var xAttestors = []xAttestor{{"a1", "D1", true}, {"a1b", "D1", true}, {"a2", "D2", true}, {"u3", "D3", false}}

func xAttestorWriter(a xAttestor) Writer {
	p := policy.ToolAuth
	if !a.trusted {
		p = policy.Web
	}
	return Writer{Principal: p, Session: "att-" + a.name, Identified: true, Name: a.name}
}

func xSessionWriter(s int) Writer {
	return Writer{Principal: policy.User, Session: fmt.Sprintf("s%d", s+1), Agent: true, Identified: true}
}

var (
	xTool  = Writer{Principal: policy.ToolAuth, Session: "tool", Identified: true, Name: "tool"}
	xWeb   = Writer{Principal: policy.Web, Session: "web", Identified: true}
	xOwner = Writer{Principal: policy.User, Identified: true}
	xNow   = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

type xFile struct {
	content string // "" = empty; "O" owner text, "E" untrusted text, "P(x)" paraphrase, "T(x)" tool echo
	stamp   Stamp
	edge    bool // a lineage system's view: a live derivation edge to an untrusted ancestor
	derived bool // ghost: the content truly derives from an untrusted origin
}

type xToken struct {
	secret  string
	file    int
	content string
	action  Action
	spent   bool // ghost: spent in truth
}

type xState struct {
	m        *Monitor
	files    [xFiles]xFile
	tokens   []xToken
	sessDer  [xSessions + 1]bool // ghost: session (s1, s2, tool) has read derived content
	ghostAtt map[string]uint8    // ghost: content → domains (bits) of truly trusted attestors
}

// gateFn decides an act for file f at place p (each file is asked about
// at an ordinary path and at the client's machinery); it may consult the
// monitor.
type gateFn func(st *xState, f int, a Action, p Place, tok string) Decision

func realGate(st *xState, f int, a Action, p Place, tok string) Decision {
	return st.m.Authorize(Request{Path: xPaths[f], Stamp: &st.files[f].stamp, Action: a, Place: p, Token: tok, Now: xNow})
}

// contentGate is a trust-scoring defence: content that looks benign acts.
// Raw untrusted text ("E") looks malicious; a paraphrase or a tool's
// summary of it does not.
func contentGate(st *xState, f int, a Action, p Place, tok string) Decision {
	if st.files[f].content != "E" {
		return Decision{Outcome: Allow, Action: a}
	}
	return realGate(st, f, a, p, tok)
}

// lineageGate is a MemLineage-style defence: the content acts unless it has
// a live derivation edge to an untrusted ancestor. Paraphrase drops the
// edge; a trusted tool's echo has a trusted immediate parent.
func lineageGate(st *xState, f int, a Action, p Place, tok string) Decision {
	if !st.files[f].edge {
		return Decision{Outcome: Allow, Action: a}
	}
	return realGate(st, f, a, p, tok)
}

// pathGate is the real gate with the machinery exception granted by path
// alone: whatever the client's own paths hold acts.
func pathGate(st *xState, f int, a Action, p Place, tok string) Decision {
	if p == Machinery && a != Promote {
		return Decision{Outcome: Allow, Rule: RuleMachinery, Action: a}
	}
	return realGate(st, f, a, p, tok)
}

// writerGate is the real gate with the machinery exception granted by the
// writer alone (an agent session of a trusted principal), not by the class
// its reads bound: what a session paraphrased from an untrusted page would
// pass for the client's own.
func writerGate(st *xState, f int, a Action, p Place, tok string) Decision {
	if s := &st.files[f].stamp; p == Machinery && a != Promote && s.Origin.Trusted() && s.Session != "" && s.Session != "tool" {
		return Decision{Outcome: Allow, Rule: RuleMachinery, Action: a}
	}
	return realGate(st, f, a, p, tok)
}

// naiveGate is the real gate with a naive corroboration count (the seed's
// Table X "naive monitor"): k accepted attestations elevate, whatever
// their domains.
func naiveGate(st *xState, f int, a Action, p Place, tok string) Decision {
	d := realGate(st, f, a, p, tok)
	if d.Outcome != Allow {
		n := 0
		for _, x := range st.m.attests[st.files[f].stamp.Hash] {
			if x.Counted {
				n++
			}
		}
		if n >= xK {
			d.Outcome, d.Rule = Allow, RuleElevated
		}
	}
	return d
}

var xHashes = map[string]Hash{}
var xNames = map[Hash]string{}

func xHash(c string) Hash {
	h, ok := xHashes[c]
	if !ok {
		h = sha256.Sum256([]byte(c))
		xHashes[c] = h
		xNames[h] = c
	}
	return h
}

func (m *Monitor) clone() *Monitor {
	n := &Monitor{rand: m.rand,
		sessions:  make(map[string]*session, len(m.sessions)),
		producers: make(map[Hash][]producer, len(m.producers)),
		attests:   make(map[Hash][]Attestation, len(m.attests)),
		tokens:    make(map[[32]byte]*token, len(m.tokens)),
	}
	n.cfg.Store(m.cfg.Load())
	for k, s := range m.sessions {
		n.sessions[k] = &session{floor: s.floor, sources: append([]Source(nil), s.sources...)}
	}
	for k, v := range m.producers {
		n.producers[k] = append([]producer(nil), v...)
	}
	for k, v := range m.attests {
		n.attests[k] = append([]Attestation(nil), v...)
	}
	for k, t := range m.tokens {
		c := *t
		n.tokens[k] = &c
	}
	return n
}

func (s *xState) clone() *xState {
	n := &xState{m: s.m.clone(), files: s.files, tokens: append([]xToken(nil), s.tokens...), sessDer: s.sessDer,
		ghostAtt: make(map[string]uint8, len(s.ghostAtt))}
	for k, v := range s.ghostAtt {
		n.ghostAtt[k] = v
	}
	return n
}

// key is the canonical encoding of a state: the monitor's whole state
// (maps in sorted order, token secrets left out: they only name tokens),
// the files' labels and the ghost.
func (s *xState) key() string {
	b := make([]byte, 0, 512)
	bit := func(v bool) byte {
		if v {
			return '1'
		}
		return '0'
	}
	src := func(l []Source) {
		for _, x := range l {
			b = append(b, '<')
			b = append(b, x.Path...)
			b = append(b, ' ')
			b = append(b, xNames[x.Hash]...)
			b = append(b, ' ', '0'+byte(x.Class), '>')
		}
	}
	for _, f := range s.files {
		b = append(b, 'F')
		b = append(b, f.content...)
		b = append(b, '|', '0'+byte(f.stamp.Class), 'a'+byte(f.stamp.Rule), bit(f.edge), bit(f.derived))
		src(f.stamp.Sources)
	}
	var ks []string
	for k := range s.m.sessions {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		x := s.m.sessions[k]
		b = append(b, 'S')
		b = append(b, k...)
		b = append(b, ':', '0'+byte(x.floor))
		src(x.sources)
	}
	ks = ks[:0]
	for h, ps := range s.m.producers {
		var l []string
		for _, p := range ps {
			l = append(l, p.session+"/"+p.name)
		}
		sort.Strings(l)
		ks = append(ks, xNames[h]+"="+strings.Join(l, ","))
	}
	sort.Strings(ks)
	b = append(b, 'P')
	for _, k := range ks {
		b = append(b, k...)
		b = append(b, ';')
	}
	ks = ks[:0]
	for h, as := range s.m.attests {
		var l []string
		for _, a := range as {
			l = append(l, a.Name+string(rune('a'+a.Rule))+string(bit(a.Counted)))
		}
		sort.Strings(l)
		ks = append(ks, xNames[h]+"="+strings.Join(l, ","))
	}
	sort.Strings(ks)
	b = append(b, 'A')
	for _, k := range ks {
		b = append(b, k...)
		b = append(b, ';')
	}
	ks = ks[:0]
	for _, t := range s.tokens {
		mt := s.m.tokens[sha256.Sum256([]byte(t.secret))]
		ks = append(ks, string([]byte{'0' + byte(t.file), '0' + byte(t.action), bit(t.spent), bit(mt.spent)})+t.content)
	}
	sort.Strings(ks)
	b = append(b, 'T')
	for _, k := range ks {
		b = append(b, k...)
		b = append(b, ';')
	}
	b = append(b, 'G')
	for _, v := range s.sessDer {
		b = append(b, bit(v))
	}
	ks = ks[:0]
	for c, d := range s.ghostAtt {
		ks = append(ks, c+"="+string(rune('0'+d)))
	}
	sort.Strings(ks)
	for _, k := range ks {
		b = append(b, k...)
		b = append(b, ';')
	}
	return string(b)
}

// counter is a deterministic nonce source, so that runs are reproducible.
type counter struct{ n uint64 }

func (c *counter) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0
	}
	c.n++
	binary.BigEndian.PutUint64(p, c.n)
	return len(p), nil
}

func xInit() *xState {
	att := map[string]string{}
	for _, a := range xAttestors {
		att[a.name] = a.domain
	}
	cfg := Config{Attestors: att}
	for a := range cfg.K {
		cfg.K[a] = xK
	}
	s := &xState{m: New(cfg, &counter{}), ghostAtt: map[string]uint8{}}
	s.files[0] = xFile{content: "O", stamp: s.m.Write(xOwner, xPaths[0], xHash("O"))}
	return s
}

type xStats struct {
	states, transitions, acts, allowedDerived  int
	byElevation, byToken, tokenRefused, quaran int
	byMachinery, violations                    int
	first, paraphrase, echo                    []string
	maxDepth                                   int
}

type xNode struct {
	parent int
	label  string
}

func xTrace(nodes []xNode, i int, last string) []string {
	var t []string
	for ; i > 0; i = nodes[i].parent {
		t = append(t, nodes[i].label)
	}
	for l, r := 0, len(t)-1; l < r; l, r = l+1, r-1 {
		t[l], t[r] = t[r], t[l]
	}
	return append(t, last)
}

func hasStep(trace []string, prefix string) bool {
	for _, s := range trace {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// explore runs breadth first over every state reachable in at most d
// steps with gate g, and checks every act (exec, control, promote of every
// file, with no token and with each token minted so far) in each of them
// against Sec. An act changes the state only when it spends a token; then
// the new state is explored too.
func explore(t *testing.T, d int, g gateFn) xStats { return exploreWith(t, d, g, false, 1) }

// exploreMachinery is explore with every act asked at an ordinary path and
// at the client's machinery.
func exploreMachinery(t *testing.T, d int, g gateFn) xStats {
	return exploreWith(t, d, g, false, int(numPlaces))
}

// exploreWith can disable write-time binding (noBinding: the monitor is
// never told what a session read), the seed's T2 ablation; acts are asked
// at the first places places (Ordinary, then Machinery).
func exploreWith(t *testing.T, d int, g gateFn, noBinding bool, places int) xStats {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	var st xStats
	init := xInit()
	seen := map[string]struct{}{init.key(): {}}
	nodes := []xNode{{parent: -1}}
	frontier := []*xState{init}
	ids := []int{0}
	for depth := 0; depth <= d && len(frontier) > 0; depth++ {
		var next []*xState
		var nextIDs []int
		for fi, s := range frontier {
			id := ids[fi]
			// Minting from inside a session is refused in every state.
			for i := 0; i < xSessions; i++ {
				if _, r := s.m.Mint(xSessionWriter(i), xPaths[1], xHash("E"), Exec, xNow, time.Hour); r != RuleMintSession {
					t.Fatalf("mint from session s%d: %v", i+1, r)
				}
			}
			add := func(n *xState, label string) {
				if depth == d {
					return // the last level: its acts are checked, it is not expanded
				}
				st.transitions++
				k := n.key()
				if _, ok := seen[k]; ok {
					return
				}
				seen[k] = struct{}{}
				nodes = append(nodes, xNode{parent: id, label: label})
				next = append(next, n)
				nextIDs = append(nextIDs, len(nodes)-1)
				if depth+1 > st.maxDepth {
					st.maxDepth = depth + 1
				}
			}
			// The last level is only checked: no transition is built from it.
			last := depth == d
			for f := 0; f < xFiles && !last; f++ {
				n := s.clone()
				n.files[f] = xFile{content: "E", stamp: n.m.Write(xWeb, xPaths[f], xHash("E")), edge: true, derived: true}
				add(n, fmt.Sprintf("write-untrusted(f%d)", f))
			}
			for src := 0; src < xFiles && !last; src++ {
				if s.files[src].content == "" {
					continue
				}
				for dst := 0; dst < xFiles; dst++ {
					if dst == src {
						continue
					}
					for sess := 0; sess <= xSessions; sess++ { // xSessions = the tool
						for _, op := range []string{"copy", "paraphrase", "echo"} {
							if (op == "echo") != (sess == xSessions) {
								continue
							}
							n := s.clone()
							w := xTool
							if sess < xSessions {
								w = xSessionWriter(sess)
							}
							from := n.files[src]
							if !noBinding {
								n.m.Read(w.Session, xPaths[src], &from.stamp)
							}
							der := from.derived || n.sessDer[sess]
							n.sessDer[sess] = der
							c, edge := from.content, from.edge
							switch op {
							case "paraphrase":
								c, edge = "P("+c+")", false
							case "echo":
								c, edge = "T("+c+")", false
							}
							n.files[dst] = xFile{content: c, stamp: n.m.Write(w, xPaths[dst], xHash(c)), edge: edge, derived: der}
							who := w.Session
							if sess == xSessions {
								who = "trusted-tool"
							}
							add(n, fmt.Sprintf("%s(%s, f%d→f%d)", op, who, src, dst))
						}
					}
				}
			}
			for f := 0; f < xFiles; f++ {
				c := s.files[f].content
				if c == "" {
					continue
				}
				for _, a := range xAttestors {
					if last {
						break
					}
					n := s.clone()
					n.m.Attest(xAttestorWriter(a), xHash(c))
					if a.trusted {
						n.ghostAtt[c] |= 1 << (a.domain[1] - '0')
					}
					trust := "trusted"
					if !a.trusted {
						trust = "untrusted"
					}
					add(n, fmt.Sprintf("attest(%s %s@%s, f%d)", trust, a.name, a.domain, f))
				}
				for a := Action(0); a < NumActions && !last; a++ {
					dup := false
					for _, tk := range s.tokens {
						if tk.file == f && tk.content == c && tk.action == a && !tk.spent {
							dup = true
						}
					}
					if dup {
						continue
					}
					n := s.clone()
					tok, r := n.m.Mint(xOwner, xPaths[f], xHash(c), a, xNow, time.Hour)
					if r != RuleMint {
						t.Fatalf("owner mint: %v", r)
					}
					n.tokens = append(n.tokens, xToken{secret: tok.Secret, file: f, content: c, action: a})
					add(n, fmt.Sprintf("authorize(f%d, %v)", f, a))
				}
				for ap := 0; ap < int(NumActions)*places; ap++ {
					a, place := Action(ap/places), Place(ap%places)
					at := ""
					if place != Ordinary {
						at = "@" + place.String()
					}
					for ti := -1; ti < len(s.tokens); ti++ {
						// The act runs on s itself; only an act that spent a
						// token changes the state: then the spend is undone on
						// s and the act replayed on a copy.
						n := s
						secret, label := "", ""
						if ti >= 0 {
							secret = n.tokens[ti].secret
						}
						st.acts++
						dec := g(n, f, a, place, secret)
						if dec.Rule == RuleToken {
							s.m.tokens[sha256.Sum256([]byte(secret))].spent = false
							n = s.clone()
							if dec = g(n, f, a, place, secret); dec.Rule != RuleToken {
								t.Fatalf("replayed act decided %v", dec.Rule)
							}
						}
						if ti >= 0 {
							label = fmt.Sprintf("%v(f%d%s, token for f%d %v)", a, f, at, n.tokens[ti].file, n.tokens[ti].action)
						} else {
							label = fmt.Sprintf("%v(f%d%s)", a, f, at)
						}
						file := n.files[f]
						if !noBinding && file.derived && file.stamp.Class != None {
							t.Fatalf("M2 broken: derived content %q has class %v (trace %v)", file.content, file.stamp.Class, xTrace(nodes, id, label))
						}
						if dec.Outcome == Quarantine {
							st.quaran++
						}
						if dec.Outcome != Allow {
							if ti >= 0 && dec.Rule != RuleToken && dec.Rule >= RuleTokenUnknown {
								st.tokenRefused++
							}
							continue
						}
						valid := false
						if ti >= 0 {
							tk := n.tokens[ti]
							valid = tk.file == f && tk.content == file.content && tk.action == a && !tk.spent
						}
						if dec.Rule == RuleToken {
							if !valid {
								t.Fatalf("monitor spent an invalid token: %v", xTrace(nodes, id, label))
							}
							n.tokens[ti].spent = true
							st.byToken++
						}
						if dec.Rule == RuleElevated {
							st.byElevation++
						}
						if dec.Rule == RuleMachinery {
							st.byMachinery++
						}
						if file.derived {
							st.allowedDerived++
							domains := 0
							for b := n.ghostAtt[file.content]; b != 0; b &= b - 1 {
								domains++
							}
							if domains < xK && !valid {
								st.violations++
								tr := xTrace(nodes, id, label)
								if st.first == nil {
									st.first = tr
								}
								if st.paraphrase == nil && hasStep(tr, "paraphrase") {
									st.paraphrase = tr
								}
								if st.echo == nil && hasStep(tr, "echo") && !hasStep(tr, "paraphrase") {
									st.echo = tr
								}
								continue
							}
						}
						if dec.Rule == RuleToken {
							add(n, label)
						}
					}
				}
			}
		}
		frontier, ids = next, nextIDs
	}
	st.states = len(seen)
	return st
}

// xDepth is the exploration depth: every state reachable in d steps, every
// act checked in each: 4, or 3 under -race or -short.
func xDepth() int {
	switch {
	case raceEnabled || testing.Short():
		return 3
	}
	return 4
}

// TestExploreSec: with the real gate, Sec holds in every reachable state,
// and the legitimate paths (elevation, tokens) are actually reached.
func TestExploreSec(t *testing.T) {
	d := xDepth()
	start := time.Now()
	st := exploreMachinery(t, d, realGate)
	t.Logf("real gate, depth %d: %d distinct states, %d transitions, %d acts checked, %v",
		d, st.states, st.transitions, st.acts, time.Since(start).Round(time.Millisecond))
	t.Logf("derived content allowed %d times (by elevation %d, by token %d); token uses refused %d; quarantined %d; allowed at the client's machinery %d",
		st.allowedDerived, st.byElevation, st.byToken, st.tokenRefused, st.quaran, st.byMachinery)
	if st.violations != 0 {
		t.Fatalf("Sec violated %d times; first: %s", st.violations, strings.Join(st.first, " → "))
	}
	if st.byToken == 0 || st.tokenRefused == 0 || st.quaran == 0 || st.byMachinery == 0 || (d >= 3 && st.byElevation == 0) {
		t.Fatalf("the explorer did not reach the legitimate paths: %+v", st)
	}
}

// TestExploreMalleableGates: the same explorer with the gate replaced by a
// content rule or by a lineage-edge rule finds the seed's T1 witness
// (write-untrusted → paraphrase → act) and a trusted-tool echo witness.
func TestExploreMalleableGates(t *testing.T) {
	d := xDepth()
	for _, g := range []struct {
		name string
		fn   gateFn
	}{{"content (looks benign)", contentGate}, {"lineage (immediate edge)", lineageGate}} {
		start := time.Now()
		st := explore(t, d, g.fn)
		t.Logf("%s gate, depth %d: %d distinct states, %d violating acts, %v",
			g.name, d, st.states, st.violations, time.Since(start).Round(time.Millisecond))
		if st.paraphrase == nil || st.echo == nil {
			t.Fatalf("%s: no witness found (paraphrase %v, echo %v)", g.name, st.paraphrase, st.echo)
		}
		t.Logf("  T1 witness (self-summarisation): %s", strings.Join(st.paraphrase, " → "))
		t.Logf("  echo witness (trusted-tool echo): %s", strings.Join(st.echo, " → "))
		if len(st.paraphrase) != 3 || !strings.HasPrefix(st.paraphrase[0], "write-untrusted") ||
			!strings.HasPrefix(st.paraphrase[1], "paraphrase") {
			t.Errorf("%s: the shortest paraphrase witness is not write-untrusted → paraphrase → act: %v", g.name, st.paraphrase)
		}
		if len(st.echo) != 3 || !strings.HasPrefix(st.echo[1], "echo") {
			t.Errorf("%s: the shortest echo witness is not write-untrusted → echo → act: %v", g.name, st.echo)
		}
	}
}

// TestExploreAblations: the explorer catches a broken monitor. Without
// write-time binding (the seed's T2) an agent's paraphrase or a tool's echo
// of untrusted content acts; with a corroboration count that ignores
// domains, two attestors of one domain elevate untrusted content.
func TestExploreAblations(t *testing.T) {
	d := xDepth()
	start := time.Now()
	st := exploreWith(t, d, realGate, true, 1)
	t.Logf("no write-time binding, depth %d: %d distinct states, %d violating acts, %v",
		d, st.states, st.violations, time.Since(start).Round(time.Millisecond))
	if st.first == nil || st.paraphrase == nil || st.echo == nil {
		t.Fatalf("T2 ablation: no violation found: %+v", st)
	}
	t.Logf("  witness: %s", strings.Join(st.first, " → "))
	t.Logf("  paraphrase witness: %s", strings.Join(st.paraphrase, " → "))
	t.Logf("  echo witness: %s", strings.Join(st.echo, " → "))

	start = time.Now()
	st = explore(t, d, naiveGate)
	t.Logf("domain-blind corroboration count, depth %d: %d distinct states, %d violating acts, %v",
		d, st.states, st.violations, time.Since(start).Round(time.Millisecond))
	if st.first == nil {
		t.Fatal("naive count: no violation found")
	}
	t.Logf("  witness: %s", strings.Join(st.first, " → "))
	if !hasStep(st.first, "attest(trusted a1@D1") || !hasStep(st.first, "attest(trusted a1b@D1") {
		t.Errorf("naive count witness is not two attestations of one domain: %v", st.first)
	}
}

// TestExploreMachinery: the machinery exception is bound to the content's
// class, not to the path or to the writer. Granted by path alone, untrusted
// content written there acts; granted by the writer alone (a trusted
// principal's agent session), a session's paraphrase of an untrusted page
// acts. The real gate has neither witness (TestExploreSec).
func TestExploreMachinery(t *testing.T) {
	const d = 3
	for _, g := range []struct {
		name, second string
		fn           gateFn
	}{{"by path", "", pathGate}, {"by writer", "paraphrase", writerGate}} {
		start := time.Now()
		st := exploreMachinery(t, d, g.fn)
		t.Logf("machinery exception %s, depth %d: %d distinct states, %d violating acts, %v",
			g.name, d, st.states, st.violations, time.Since(start).Round(time.Millisecond))
		w := st.first
		if g.second != "" {
			w = st.paraphrase
		}
		if w == nil {
			t.Fatalf("machinery exception %s: no violation found: %+v", g.name, st)
		}
		t.Logf("  witness: %s", strings.Join(w, " → "))
		if !strings.HasPrefix(w[0], "write-untrusted") || !strings.Contains(w[len(w)-1], "@machinery") ||
			(g.second != "" && (len(w) != 3 || !strings.HasPrefix(w[1], g.second))) {
			t.Errorf("machinery exception %s: the witness is not write-untrusted → %s → act at the machinery: %v", g.name, g.second, w)
		}
	}
}
