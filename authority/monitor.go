package authority

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aerfs/aerfs/policy"
)

// maxSources bounds the sources a session remembers for the class chain.
const maxSources = 8

// MaxTTL is the longest an owner token may live.
const MaxTTL = 24 * time.Hour

// Monitor is the authority state machine fs and the daemon share: what each
// session has read (its class floor), who produced each content, the
// attestations of each content hash and the owner tokens. Labels themselves
// (the Stamps) live in fs's label store; the Monitor is told about reads and
// writes and returns the stamp to store. All methods are safe for
// concurrent use; each is atomic.
type Monitor struct {
	mu        sync.Mutex
	cfg       atomic.Pointer[Config] // replaced whole by SetConfig (a policy reload)
	rand      io.Reader
	sessions  map[string]*session
	producers map[Hash][]producer
	attests   map[Hash][]Attestation
	tokens    map[[32]byte]*token
}

type session struct {
	floor   Class
	sources []Source
}

// producer is who wrote a content, for the self-attestation check.
type producer struct {
	session string
	name    string
}

// Attestation is one attestor's statement about a content hash, counted or
// ignored (Rule says which and why).
type Attestation struct {
	Name    string `json:"name"`
	Domain  string `json:"domain,omitempty"`
	Rule    Rule   `json:"rule"`
	Counted bool   `json:"counted"` // accepted: trusted, untainted, registered, not self
}

type token struct {
	path   string
	hash   Hash
	action Action
	expiry time.Time
	spent  bool
}

// New returns a monitor for cfg. Attestors are copied; cfg may be reused.
// rnd supplies token nonces; nil means crypto/rand.
func New(cfg Config, rnd io.Reader) *Monitor {
	if rnd == nil {
		rnd = rand.Reader
	}
	m := &Monitor{
		rand:      rnd,
		sessions:  map[string]*session{},
		producers: map[Hash][]producer{},
		attests:   map[Hash][]Attestation{},
		tokens:    map[[32]byte]*token{},
	}
	m.SetConfig(cfg)
	return m
}

// Config returns the monitor's configuration (its Attestors map must not be
// modified).
func (m *Monitor) Config() *Config { return m.cfg.Load() }

// SetConfig replaces the configuration (a policy reload): the attestors
// and thresholds count from the next decision on. Attestors are copied;
// cfg may be reused. Attestations already made keep the domain they were
// counted under.
func (m *Monitor) SetConfig(cfg Config) {
	att := make(map[string]string, len(cfg.Attestors))
	for n, d := range cfg.Attestors {
		att[n] = d
	}
	cfg.Attestors = att
	m.cfg.Store(&cfg)
}

// Read records that the subject whose reads are kept under key (its
// session, or the implicit session fs gives an owner process) read the
// content at path with stamp st. Its later writes are at most st.Class. A
// nil stamp (an unlabelled file) is a file nobody labelled: no effect, as
// for taint. Reading act content changes nothing.
func (m *Monitor) Read(key, path string, st *Stamp) {
	if st == nil {
		return
	}
	c := st.Class
	if !c.Valid() {
		c = None
	}
	if c == Act {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[key]
	if s == nil {
		s = &session{floor: Act}
		m.sessions[key] = s
	}
	src := Source{Path: path, Hash: st.Hash, Class: c}
	switch {
	case c < s.floor:
		s.floor = c
		s.sources = append(s.sources[:0:0], src)
	case c == s.floor && len(s.sources) < maxSources:
		for _, x := range s.sources {
			if x == src {
				return
			}
		}
		s.sources = append(s.sources[:len(s.sources):len(s.sources)], src)
	}
}

// Floor returns the lowest class the session under key has read and the
// sources that set it (a copy).
func (m *Monitor) Floor(key string) (Class, []Source) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[key]
	if s == nil {
		return Act, nil
	}
	return s.floor, append([]Source(nil), s.sources...)
}

// EndSession forgets a session's reads once none of its processes is left.
// Session ids are never reused while a process of the session lives.
func (m *Monitor) EndSession(key string) {
	m.mu.Lock()
	delete(m.sessions, key)
	m.mu.Unlock()
}

// Write binds the class of the content with hash h that w writes at path:
// the minimum of w's base class and the floor of what its session read
// (M2). The caller stores the returned stamp in the file's label. A copy,
// a paraphrase or an echo is a read followed by a write and gets its class
// from the read; a rename or hard link is not a write and keeps the label.
func (m *Monitor) Write(w Writer, path string, h Hash) Stamp {
	cls, rule := m.Config().Base(&w)
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Stamp{Class: cls, Rule: rule, Hash: h, Origin: w.Principal, Session: w.Session}
	if s := m.sessions[w.Session]; s != nil && s.floor < Act {
		if s.floor < cls {
			st.Class, st.Rule = s.floor, RuleWriteSource
		}
		if s.floor <= st.Class {
			st.Sources = append([]Source(nil), s.sources...)
		}
	}
	if h == (Hash{}) {
		// A plain file's content is not hashed: no attestation can name
		// it, and a producer kept under the zero hash would only grow
		// with every session that ever wrote a plain file.
		return st
	}
	p := producer{session: w.Session, name: w.Name}
	for _, x := range m.producers[h] {
		if x == p {
			return st
		}
	}
	m.producers[h] = append(m.producers[h], p)
	return st
}

// Forget drops what the monitor remembers of the producers of content no
// longer stored (aerfs gc pruned it): the monitor's memory follows the
// store, not the history. A file that still holds such content names its
// writer in its label (Produced).
func (m *Monitor) Forget(hs []Hash) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range hs {
		delete(m.producers, h)
	}
}

// AttestResult says what became of an attestation.
type AttestResult struct {
	Rule    Rule
	Counted bool
	Domain  string
}

// Attest records that a attests the content with hash h. It is counted only
// if a is a registered attestor, a trusted principal outside agent
// sessions (the owner channel or TOOL_AUTH), untainted, has read nothing
// below act, and did not produce h itself. Ignored attestations are kept,
// with the rule that ignored them, for `aerfs authority`.
func (m *Monitor) Attest(a Writer, h Hash) AttestResult {
	dom, registered := m.Config().Attestors[a.Name]
	m.mu.Lock()
	defer m.mu.Unlock()
	r := AttestResult{Domain: dom}
	base, _ := m.Config().Base(&a)
	floor := Act
	if s := m.sessions[a.Session]; s != nil {
		floor = s.floor
	}
	switch {
	case a.Name == "" || !registered:
		r.Rule = RuleAttestUnregistered
	case !a.Identified || !a.Principal.Valid() || (!a.Principal.Trusted() && a.Principal != policy.ToolAuth) || a.Agent:
		r.Rule = RuleAttestUntrusted
	case base < Act || floor < Act:
		r.Rule = RuleAttestTainted
	case m.producedBy(h, &a):
		r.Rule = RuleAttestSelf
	}
	list := m.attests[h]
	for _, x := range list {
		if x.Name == a.Name && (x.Counted || x.Rule == r.Rule) {
			return AttestResult{Rule: RuleAttestRepeat, Domain: dom, Counted: false}
		}
	}
	if r.Rule == RuleUnset {
		r.Counted, r.Rule = true, RuleAttestCounted
		for _, x := range list {
			if x.Counted && x.Domain == dom {
				r.Rule = RuleAttestSameDomain
				break
			}
		}
	}
	m.attests[h] = append(list, Attestation{Name: a.Name, Domain: dom, Rule: r.Rule, Counted: r.Counted})
	return r
}

func (m *Monitor) producedBy(h Hash, a *Writer) bool {
	for _, p := range m.producers[h] {
		if (a.Session != "" && p.session == a.Session) || (a.Name != "" && p.name == a.Name) {
			return true
		}
	}
	return false
}

// Elevation is the corroboration state of a content hash for an action.
type Elevation struct {
	K        int
	Domains  []string      // distinct domains counted, sorted
	Elevated bool          // len(Domains) >= K
	All      []Attestation // every attestation, counted or ignored, in arrival order
}

// Elevation reports whether h is elevated to act for a and by whom.
func (m *Monitor) Elevation(h Hash, a Action) Elevation {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := Elevation{K: m.Config().k(a)}
	for _, x := range m.attests[h] {
		e.All = append(e.All, x)
		if x.Counted && !containsString(e.Domains, x.Domain) {
			e.Domains = append(e.Domains, x.Domain)
		}
	}
	sort.Strings(e.Domains)
	e.Elevated = len(e.Domains) >= e.K
	return e
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// elevatedLocked counts distinct counted domains without allocating more
// than the threshold's worth.
func (m *Monitor) elevatedLocked(h Hash, a Action) bool {
	k := m.Config().k(a)
	var seen [8]string
	doms := seen[:0]
	for _, x := range m.attests[h] {
		if x.Counted && !containsString(doms, x.Domain) {
			doms = append(doms, x.Domain)
			if len(doms) >= k {
				return true
			}
		}
	}
	return false
}

// Token is a minted owner authorisation. Secret is shown once: the monitor
// keeps only its digest.
type Token struct {
	Secret string
	Path   string
	Hash   Hash
	Action Action
	Expiry time.Time
}

// Mint makes a single-use token for action a on the content h at path,
// valid until now+ttl. Only the owner channel mints: a subject inside a
// session (an agent, a tool, the owner's tainted implicit session) is
// refused, and so is anyone untrusted or unidentified.
func (m *Monitor) Mint(w Writer, path string, h Hash, a Action, now time.Time, ttl time.Duration) (Token, Rule) {
	switch {
	case !w.Identified || !w.Principal.Valid() || !w.Principal.Trusted():
		return Token{}, RuleMintNotOwner
	case w.Session != "" || w.Agent:
		return Token{}, RuleMintSession
	case a >= NumActions || ttl <= 0 || ttl > MaxTTL || path == "":
		return Token{}, RuleMintBad
	}
	var nonce [16]byte
	if _, err := io.ReadFull(m.rand, nonce[:]); err != nil {
		return Token{}, RuleMintBad
	}
	t := Token{Secret: "aerfs-tok-" + hex.EncodeToString(nonce[:]), Path: path, Hash: h, Action: a, Expiry: now.Add(ttl)}
	m.mu.Lock()
	m.tokens[sha256.Sum256([]byte(t.Secret))] = &token{path: path, hash: h, action: a, expiry: t.Expiry}
	m.mu.Unlock()
	return t, RuleMint
}

// Consume checks secret against (path, h, a) at now and spends it if it
// matches, atomically: a token acts once. A mismatch does not spend it.
func (m *Monitor) Consume(secret, path string, h Hash, a Action, now time.Time) Rule {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consumeLocked(secret, path, h, a, now)
}

func (m *Monitor) consumeLocked(secret, path string, h Hash, a Action, now time.Time) Rule {
	t := m.tokens[sha256.Sum256([]byte(secret))]
	switch {
	case t == nil:
		return RuleTokenUnknown
	case t.spent:
		return RuleTokenReplay
	case !now.Before(t.expiry):
		return RuleTokenExpired
	case t.path != path:
		return RuleTokenPath
	case t.action != a:
		return RuleTokenAction
	case t.hash != h:
		return RuleTokenContent
	}
	t.spent = true
	return RuleToken
}

// Sweep forgets tokens that expired before now (a later replay of one is
// then reported as unknown rather than replayed).
func (m *Monitor) Sweep(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, t := range m.tokens {
		if now.After(t.expiry) {
			delete(m.tokens, k)
		}
	}
}

// Request is a consequential action to decide.
type Request struct {
	Path   string
	Stamp  *Stamp // the label's stamp for the current content
	Action Action
	Place  Place  // where the action happens: the client's machinery or not
	Token  string // an owner token presented with the action, "" for none
	Now    time.Time
}

// Authorize is the whole act gate: Check on the bound class; below what the
// action needs, elevation of the exact hash for this action (M3), then the
// presented owner token, consumed atomically. A presented token that does
// not match refuses with the token's rule (no quarantine: an explicit
// authorisation failed).
func (m *Monitor) Authorize(r Request) Decision {
	d := Check(r.Stamp, r.Action, m.Config(), r.Place)
	if d.Outcome == Allow || d.Rule == RuleInvalid {
		return d
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.elevatedLocked(r.Stamp.Hash, r.Action) {
		d.Outcome, d.Rule = Allow, RuleElevated
		return d
	}
	if r.Token != "" {
		rule := m.consumeLocked(r.Token, r.Path, r.Stamp.Hash, r.Action, r.Now)
		d.Rule = rule
		d.Outcome = Refuse
		if rule == RuleToken {
			d.Outcome = Allow
		}
	}
	return d
}

// Replay restores an attestation decided before a restart, as the evidence
// log recorded it (name, domain, rule, counted), without deciding it again:
// the attestor's taint at the time is not known any more. The daemon
// replays the log's attestation records at start; tokens are not replayed
// (a restart voids every unspent token, which fails closed).
func (m *Monitor) Replay(h Hash, a Attestation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, x := range m.attests[h] {
		if x == a {
			return
		}
	}
	m.attests[h] = append(m.attests[h], a)
}

// Produced records that the session with key session (and, for an
// attestor, name) produced the content with hash h, as the label of a file
// holding it says: what Write learns is kept in memory only, and a label
// outlives the mount. The daemon calls it with the file's stamp before an
// attestation, so that a session that wrote a file before a restart is
// still its producer (AU4-self).
func (m *Monitor) Produced(h Hash, session, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := producer{session: session, name: name}
	for _, x := range m.producers[h] {
		if x == p {
			return
		}
	}
	m.producers[h] = append(m.producers[h], p)
}
