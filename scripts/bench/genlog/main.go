// Command genlog writes a valid, signed evidence log of N records with many
// sessions straight through the evidence package (no mount), and the
// workspace files the log says the guarded files hold, so that aerfs can
// be mounted over a log of a year's use in minutes rather than hours.
//
//	aerfs init WS --state STATE
//	genlog -state STATE -workspace WS -records 1000000 -sessions 10000
//
// The mix imitates an agent's year: sessions of USER, WEB and TOOL_AUTH
// principals, each reading files (reads records), writing memory and skill
// files (write records with content, naming the previous version and the
// session's reads as parents), refused and quarantined, tainted, writing
// plain files; the owner editing MEMORY.md outside sessions; a mount, a
// policy load and a snapshot of every guarded file each day; a few
// attestations. Every session but the last few is ended. The log ends
// with an unmount, as after a clean stop.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/logindex"
)

func main() {
	var o opts
	flag.StringVar(&o.state, "state", "", "state directory (aerfs init WS --state STATE first)")
	flag.StringVar(&o.ws, "workspace", "", "workspace: the guarded files are written there with the content the log ends with")
	flag.IntVar(&o.records, "records", 100000, "records to write (about)")
	flag.IntVar(&o.sessions, "sessions", 1000, "sessions to register")
	flag.IntVar(&o.live, "live", 5, "sessions left without an end record (registered, not ended)")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed")
	flag.BoolVar(&o.noIndex, "no-index", false, "do not write the log's index (the first mount then rebuilds it)")
	flag.Parse()
	if o.state == "" || o.ws == "" {
		fmt.Fprintln(os.Stderr, "genlog: -state and -workspace are required")
		os.Exit(2)
	}
	start := time.Now()
	if err := generate(o); err != nil {
		fmt.Fprintln(os.Stderr, "genlog:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "genlog: %d records, %d sessions in %s\n", o.records, o.sessions, time.Since(start).Round(time.Millisecond))
}

type opts struct {
	state, ws         string
	records, sessions int
	live              int
	seed              uint64
	noIndex           bool
}

// gen is the generator's view of the workspace as the log describes it.
type gen struct {
	l       *evidence.Log
	rnd     *rand.Rand
	t       time.Time
	step    time.Duration
	n       int
	batch   []*evidence.Record
	cur     map[string]string // guarded path → content hash
	lastRec map[string]string // guarded path → id of the record of its version
	content map[string][]byte // guarded path → current content
	version map[string]int
	pending []string // quarantine record ids not yet decided
}

var guarded = func() []string {
	ps := []string{"MEMORY.md", "AGENTS.md", "CLAUDE.md", "TOOLS.md", "USER.md", "HEARTBEAT.md"}
	for i := 0; i < 40; i++ {
		ps = append(ps, fmt.Sprintf("memory/notes-%02d.md", i))
	}
	for i := 0; i < 12; i++ {
		ps = append(ps, fmt.Sprintf("skills/skill-%02d/SKILL.md", i))
	}
	return ps
}()

// pickGuarded: MEMORY.md gets a fifth of the writes, the rest spread out.
func (g *gen) pickGuarded() string {
	if g.rnd.IntN(5) == 0 {
		return "MEMORY.md"
	}
	return guarded[1+g.rnd.IntN(len(guarded)-1)]
}

func (g *gen) plainPath() string {
	switch g.rnd.IntN(3) {
	case 0:
		return fmt.Sprintf("notes/page-%04d.md", g.rnd.IntN(2000))
	case 1:
		return fmt.Sprintf("src/pkg%02d/file%03d.go", g.rnd.IntN(50), g.rnd.IntN(200))
	default:
		return fmt.Sprintf("downloads/d-%05d.html", g.rnd.IntN(20000))
	}
}

// tick advances the clock by one record's share of the year.
func (g *gen) tick() string {
	g.t = g.t.Add(g.step + time.Duration(g.rnd.IntN(1000)))
	return evidence.FormatTime(g.t)
}

// add queues r; queued records are appended together (one batch).
func (g *gen) add(r *evidence.Record) string {
	r.Version = evidence.RecordVersion
	r.Meta.Time = g.tick()
	if r.Taint == nil {
		r.Taint = []string{}
	}
	if r.Parents == nil {
		r.Parents = []string{}
	}
	id, err := r.ID()
	if err != nil {
		panic(err)
	}
	g.batch = append(g.batch, r)
	g.n++
	if len(g.batch) >= 2000 {
		g.flush()
	}
	return id
}

func (g *gen) flush() {
	if len(g.batch) == 0 {
		return
	}
	if _, err := g.l.AppendAll(g.batch...); err != nil {
		fmt.Fprintln(os.Stderr, "genlog: append:", err)
		os.Exit(1)
	}
	g.batch = g.batch[:0]
}

func (g *gen) blob(data []byte) string {
	h, err := g.l.PutBlob(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genlog: blob:", err)
		os.Exit(1)
	}
	return h
}

func (g *gen) hashOf(s string) string {
	var b [32]byte
	for i := range b {
		b[i] = byte(g.rnd.Uint32())
	}
	_ = s
	return fmt.Sprintf("%x", b)
}

// write records a new version of a guarded path by principal/session.
func (g *gen) write(path, principal, session string, parents []string) {
	g.version[path]++
	c := []byte(fmt.Sprintf("# %s\n\nversion %d, written by %s %s at %s\n%s\n", path, g.version[path], principal, session,
		g.t.Format(time.RFC3339), strings.Repeat("- a remembered line\n", 1+g.rnd.IntN(8))))
	h := g.blob(c)
	ps := append([]string{}, parents...)
	if id := g.lastRec[path]; id != "" {
		ps = append(ps, id)
	}
	class := "act"
	if session != "" {
		class = "inform"
	}
	id := g.add(&evidence.Record{Type: evidence.TypeWrite, Principal: principal, Parents: dedupe(ps),
		Meta:    evidence.Meta{Path: path, Op: "write", Verdict: "allow", Rule: "R0-allow", Pid: 4000 + g.rnd.IntN(30000), Exe: "/usr/bin/python3", UID: 1000, Session: session, Class: class, Reason: "committed"},
		Payload: &evidence.Payload{OldHash: g.cur[path], NewHash: h}})
	g.cur[path] = h
	g.lastRec[path] = id
	g.content[path] = c
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, x := range s {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// day records a mount: mount, policy load, and a snapshot of every
// guarded file, after the previous day's unmount.
func (g *gen) day(first bool) {
	if !first {
		g.add(&evidence.Record{Type: evidence.TypeUnmount, Principal: "SYS", Meta: evidence.Meta{Path: "/ws", Pid: 100, Reason: "unmounted"}})
	}
	g.add(&evidence.Record{Type: evidence.TypeMount, Principal: "SYS", Meta: evidence.Meta{Path: "/ws", Pid: 100, Reason: "mounting over /ws"},
		Payload: &evidence.Payload{Detail: "aerfs genlog"}})
	g.add(&evidence.Record{Type: evidence.TypePolicyLoad, Principal: "SYS", Meta: evidence.Meta{Path: "/state/aerfs.yaml", Reason: "policy loaded at mount"}})
	var files []evidence.FileState
	for _, p := range sortedKeys(g.cur) {
		files = append(files, evidence.FileState{Path: p, Hash: g.cur[p]})
	}
	p := &evidence.Payload{Detail: "mount"}
	if len(files) > 0 {
		p.Files = files
	}
	g.add(&evidence.Record{Type: evidence.TypeSnapshot, Principal: "SYS",
		Meta: evidence.Meta{Op: "snapshot", Verdict: "allow", Reason: "state of the guarded files at mount"}, Payload: p})
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// session writes one session's records: about per records in all.
func (g *gen) session(k, per int, end bool) {
	id := fmt.Sprintf("gen-%06d", k)
	principal := "USER"
	var taint []string
	switch r := g.rnd.IntN(10); {
	case r < 2:
		principal, taint = "WEB", []string{"WEB_DERIVED"}
	case r < 4:
		principal, taint = "TOOL_AUTH", []string{"TOOL_OUTPUT"}
	}
	g.add(&evidence.Record{Type: evidence.TypeSessionStart, Principal: principal, Taint: taint,
		Meta: evidence.Meta{Session: id, Pid: 2000 + k%30000, Exe: "/usr/local/bin/aerfs", UID: 1000, Op: "register", Verdict: "allow",
			Rule: "RS-grant", Reason: "a process may grant a principal at or below its own"},
		Payload: &evidence.Payload{Detail: "sandbox: landlock,mountns,seccomp", To: "c-" + id}})
	var lastReads string
	tainted := len(taint) > 0
	for i := 2; i < per; i++ {
		switch r := g.rnd.IntN(100); {
		case r < 25: // the session reads files
			var reads []evidence.FileRead
			for j := 0; j < 1+g.rnd.IntN(4); j++ {
				p := g.plainPath()
				if g.rnd.IntN(4) == 0 {
					p = g.pickGuarded()
				}
				fr := evidence.FileRead{Path: p}
				if h := g.cur[p]; h != "" {
					fr.Hash = h
				} else if g.rnd.IntN(3) == 0 {
					fr.Fp = fmt.Sprintf("2049:%d:%d:1772366401500000000:1772366401500000000", 100000+g.rnd.IntN(900000), g.rnd.IntN(9000))
				} else {
					fr.Hash = g.hashOf(p)
				}
				reads = append(reads, fr)
			}
			var ps []string
			if lastReads != "" {
				ps = []string{lastReads}
			}
			lastReads = g.add(&evidence.Record{Type: evidence.TypeReads, Principal: principal, Taint: taint, Parents: ps,
				Meta:    evidence.Meta{Op: "read", Pid: 2000 + k%30000, Exe: "/usr/bin/python3", UID: 1000, Session: id, Reason: "files read by the session"},
				Payload: &evidence.Payload{Reads: reads}})
		case r < 37: // a guarded write: allowed for a clean USER session, refused otherwise
			path := g.pickGuarded()
			if !tainted && principal == "USER" {
				g.write(path, principal, id, []string{lastReads})
				break
			}
			rule := "R3-principal"
			if principal == "USER" {
				rule = "R2-taint"
			}
			v := g.add(&evidence.Record{Type: evidence.TypeVerdict, Principal: principal, Taint: taint,
				Meta: evidence.Meta{Path: path, Op: "commit", Verdict: "deny", Rule: rule, Pid: 2000 + k%30000, Exe: "/usr/bin/python3", UID: 1000, Session: id, Reason: "untrusted writer"}})
			if g.rnd.IntN(3) == 0 {
				h := g.blob([]byte(fmt.Sprintf("refused content %d of %s\n", g.n, path)))
				q := g.add(&evidence.Record{Type: evidence.TypeQuarantine, Principal: principal, Taint: taint, Parents: []string{v},
					Meta:    evidence.Meta{Path: path, Op: "commit", Verdict: "deny", Rule: rule, Pid: 2000 + k%30000, UID: 1000, Session: id, Reason: "refused content kept"},
					Payload: &evidence.Payload{OldHash: g.cur[path], NewHash: h}})
				g.pending = append(g.pending, q)
			}
		case r < 52: // a plain file written by a labelled writer
			var ps []string
			if lastReads != "" {
				ps = []string{lastReads}
			}
			g.add(&evidence.Record{Type: evidence.TypeWrite, Principal: principal, Taint: taint, Parents: ps,
				Meta: evidence.Meta{Path: g.plainPath(), Op: "write", Verdict: "allow", Rule: "R0-plain", Pid: 2000 + k%30000, Exe: "/usr/bin/python3", UID: 1000, Session: id, Class: "inform"}})
		case r < 55: // taint declared or gained
			taint = []string{"WEB_DERIVED"}
			tainted = true
			g.add(&evidence.Record{Type: evidence.TypeTaint, Principal: principal, Taint: taint,
				Meta: evidence.Meta{Session: id, Pid: 2000 + k%30000, Exe: "/usr/bin/curl", UID: 1000, Reason: "exec of /usr/bin/curl as WEB"}})
		default: // a refused open, a secret read, a namespace lookup
			g.add(&evidence.Record{Type: evidence.TypeVerdict, Principal: principal, Taint: taint,
				Meta: evidence.Meta{Path: g.pickGuarded(), Op: "open", Verdict: "deny", Rule: "R3-principal", Pid: 2000 + k%30000, Exe: "/usr/bin/sed", UID: 1000, Session: id, Reason: "untrusted principal"}})
		}
	}
	if end {
		g.add(&evidence.Record{Type: evidence.TypeSessionEnd, Principal: principal, Taint: taint,
			Meta: evidence.Meta{Session: id, Reason: "session root exited"}})
	}
}

func generate(o opts) error {
	l, err := evidence.Open(o.state)
	if err != nil {
		return err
	}
	g := &gen{l: l, rnd: rand.New(rand.NewPCG(o.seed, 7)), cur: map[string]string{}, lastRec: map[string]string{},
		content: map[string][]byte{}, version: map[string]int{}}
	year := 365 * 24 * time.Hour
	g.t = time.Now().Add(-year - time.Hour).UTC()
	g.step = year / time.Duration(max(o.records, 1))
	g.day(true)
	for _, p := range guarded[:8] {
		g.write(p, "USER", "", nil)
	}
	per := max(o.records/max(o.sessions, 1), 4)
	days := max(o.sessions/365, 1)
	for k := 0; k < o.sessions; k++ {
		if k > 0 && k%days == 0 {
			g.day(false)
		}
		// The owner edits MEMORY.md now and then, outside sessions.
		if g.rnd.IntN(4) == 0 {
			g.write("MEMORY.md", "USER", "", nil)
		}
		// The owner decides some of what waits in quarantine.
		if len(g.pending) > 0 && g.rnd.IntN(3) == 0 {
			q := g.pending[0]
			g.pending = g.pending[1:]
			g.add(&evidence.Record{Type: evidence.TypeReject, Principal: "USER", Parents: []string{q},
				Meta: evidence.Meta{Op: "reject", Verdict: "allow", Rule: "RO-owner", UID: 1000, Reason: "the owner rejected it"}})
		}
		if k%500 == 7 {
			h := g.cur["skills/skill-00/SKILL.md"]
			g.add(&evidence.Record{Type: evidence.TypeVerdict, Principal: "TOOL_AUTH",
				Meta:    evidence.Meta{Path: "skills/skill-00/SKILL.md", Op: "attest", Verdict: "allow", Rule: "AU4-attest", UID: 1000, Session: fmt.Sprintf("gen-%06d", k), Reason: "attested"},
				Payload: &evidence.Payload{Detail: "sha256=" + h + " domain=\"finance\""}})
		}
		g.session(k, per, k < o.sessions-o.live)
	}
	for g.n < o.records-1 {
		g.session(o.sessions+g.n, min(per, o.records-1-g.n+2), true)
	}
	g.add(&evidence.Record{Type: evidence.TypeUnmount, Principal: "SYS", Meta: evidence.Meta{Path: "/ws", Pid: 100, Reason: "unmounted"}})
	g.flush()
	if err := l.Close(); err != nil {
		return err
	}
	for p, c := range g.content {
		f := filepath.Join(o.ws, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, c, 0o644); err != nil {
			return err
		}
	}
	if o.noIndex {
		return nil
	}
	return logindex.Build(o.state)
}
