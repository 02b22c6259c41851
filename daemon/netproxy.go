package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/netproxy"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
	"github.com/aerfs/aerfs/sandbox"
)

// # The network of sessions
//
// A confined session has a network namespace of its own with only loopback
// (sandbox/netns.go). `aerfs run` opens the proxy's listening socket in it
// and sends the descriptor with its confinement report; the daemon checks
// that the socket lives in the namespace of the process that registered
// the session (and not in the daemon's), serves it with netproxy, and dials
// out from its own namespace. A connection accepted there belongs to that
// session by construction. Every connection is decided by the policy
// (HostChannel, DecideConnect), taints the session before a web host's
// first byte reaches it, and ends in a net record.
//
// A session started from within a session has no namespace of its own: it
// shares its parent's, and its connections are its parent's (whose taint
// it inherits). The model endpoints a registration names count only for a
// registration made outside every session: from inside one, a program
// could otherwise name any host its model.

// maxModelEndpoints bounds the model endpoints one registration may name.
const maxModelEndpoints = 16

// netPlan is what a registration said about its network.
type netPlan struct {
	mode   string // "proxy", "open", "" (started from within a session)
	model  []policy.HostPattern
	parent string // the session it was started from
	off    bool   // --sandbox=off
}

// detail is how the session-start record states the plan.
func (n netPlan) detail(pol *policy.Policy) string {
	switch {
	case n.parent != "":
		return "the proxy of session " + n.parent + " (started from within it)"
	case n.off:
		return "open (--sandbox=off)"
	case n.mode == "open":
		if pol.SandboxNetwork() == policy.NetworkOpen {
			return "open (sandbox.network: open)"
		}
		return "open (no network namespace: this session is not behind the proxy)"
	}
	s := "proxy"
	if len(n.model) > 0 {
		var m []string
		for _, p := range n.model {
			m = append(m, p.String())
		}
		s += " (model endpoints " + strings.Join(m, " ") + ")"
	}
	return s
}

// netDetail is the session-start record's network part (none for a
// --sandbox=off session, whose "sandbox: off" says it).
func netDetail(n netPlan, pol *policy.Policy) string {
	if n.off {
		return ""
	}
	return "; network: " + n.detail(pol)
}

// parseNetPlan validates the network fields of a register request.
func parseNetPlan(req Request, parent string) (netPlan, error) {
	n := netPlan{mode: req.Network, parent: parent, off: req.Sandbox == "off"}
	switch req.Network {
	case "", "proxy", "open":
	default:
		return n, fmt.Errorf("unknown network %q (proxy or open)", req.Network)
	}
	if len(req.Model) > maxModelEndpoints {
		return n, fmt.Errorf("%d model endpoints, at most %d", len(req.Model), maxModelEndpoints)
	}
	for _, m := range req.Model {
		p, err := policy.ParseHostPattern(m)
		if err != nil || strings.Contains(m, "*") {
			return n, fmt.Errorf("model endpoint %q: want host:port", m)
		}
		if parent == "" {
			n.model = append(n.model, p)
		}
	}
	return n, nil
}

// sessionNets is the network state of every session of this mount.
type sessionNets struct {
	m   *guarded
	rec ledger.Recorder
	log zerolog.Logger

	mu      sync.Mutex
	plans   map[string]netPlan           // by session id, the latest registration's
	byRoot  map[principal.ProcID]netPlan // by the process that registered
	proxies map[string]*sessionProxy
	hosts   map[string]map[string]*NetHost // session id → host:port → what it did
}

func newSessionNets(m *guarded, rec ledger.Recorder, log zerolog.Logger) *sessionNets {
	return &sessionNets{m: m, rec: rec, log: log, plans: map[string]netPlan{}, byRoot: map[principal.ProcID]netPlan{},
		proxies: map[string]*sessionProxy{}, hosts: map[string]map[string]*NetHost{}}
}

// NetHost is what a session did with one host, for aerfs status.
type NetHost struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Channel  string `json:"channel"`
	Conns    int    `json:"connections"`
	Refused  int    `json:"refused"`
	Failed   int    `json:"failed"` // allowed, but the host could not be reached
	Rule     string `json:"rule"`   // the last verdict's
	Sent     int64  `json:"sent"`
	Received int64  `json:"received"`
}

func (n *sessionNets) planned(id string, root principal.ProcID, p netPlan) {
	n.mu.Lock()
	n.plans[id] = p
	if len(n.byRoot) >= 256 {
		// Registrations that handed no listener over (open, nested, or
		// their aerfs run ended first) are forgotten once they are gone.
		for r := range n.byRoot {
			if !principal.Alive(r) {
				delete(n.byRoot, r)
			}
		}
	}
	n.byRoot[root] = p
	n.mu.Unlock()
}

// sessionProxy is the proxy of one `aerfs run`: the listeners it handed
// over, all in one network namespace.
type sessionProxy struct {
	n       *sessionNets
	sess    *principal.Session
	uid     uint32
	netns   string
	addr    string // the proxy's address in the session's namespace
	model   []policy.HostPattern
	p       *netproxy.Proxy
	started time.Time
}

// attach takes the listening sockets aerfs run sent with the confinement
// report of session res.Session, checks them and serves them. It keeps the
// files it uses (their entries become nil).
func (n *sessionNets) attach(res *principal.Resolved, what []string, files []*os.File) error {
	sess := res.Session
	n.mu.Lock()
	// The plan of this registration: several processes may join one
	// session, each with its own aerfs run and model endpoints.
	plan, ok := n.byRoot[res.Proc.ID]
	delete(n.byRoot, res.Proc.ID)
	n.mu.Unlock()
	switch {
	case !ok || plan.mode != "proxy" || plan.parent != "":
		return fmt.Errorf("session %s was not registered with a network namespace of its own: no listener is taken", sess.ID)
	case len(what) != len(files) || len(files) == 0:
		return fmt.Errorf("%d descriptors described as %d listeners", len(files), len(what))
	}
	mine := sandbox.NetNS()
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(res.Proc.ID.Tgid) + "/ns/net")
	if err != nil {
		return fmt.Errorf("cannot read the session's network namespace: %w", err)
	}
	if theirs == mine {
		return fmt.Errorf("session %s runs in the daemon's network namespace: its proxy would be no boundary", sess.ID)
	}
	type lst struct {
		ln     net.Listener
		target *netproxy.Target
	}
	var ls []lst
	closeAll := func() {
		for _, l := range ls {
			l.ln.Close()
		}
	}
	var proxyAddr string
	for i, f := range files {
		kind, addr, _ := strings.Cut(what[i], " ")
		bound, err := sandbox.ListeningTCP(int(f.Fd()))
		if err == nil && bound != addr {
			err = fmt.Errorf("bound to %s, described as %s", bound, addr)
		}
		if err == nil {
			var ns string
			if ns, err = sandbox.SocketNetNS(int(f.Fd())); err == nil && ns != theirs {
				err = fmt.Errorf("in namespace %s, not the session's %s", ns, theirs)
			}
		}
		var target *netproxy.Target
		switch {
		case err != nil:
		case kind == "proxy" && i == 0:
			proxyAddr = addr
		case kind == "forward" && i > 0:
			target, err = forwardTarget(addr, plan.model)
		default:
			err = fmt.Errorf("unexpected %q", what[i])
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("listener %d: %w", i, err)
		}
		ln, err := net.FileListener(f)
		if err != nil {
			closeAll()
			return fmt.Errorf("listener %d: %w", i, err)
		}
		ls = append(ls, lst{ln, target})
	}
	sp := &sessionProxy{n: n, sess: sess, uid: res.Proc.UID, netns: theirs, addr: proxyAddr, model: plan.model, started: time.Now()}
	n.mu.Lock()
	for _, other := range n.proxies {
		if other.netns == theirs {
			n.mu.Unlock()
			closeAll()
			return fmt.Errorf("the network namespace %s already has the proxy of session %s", theirs, other.sess.ID)
		}
	}
	sp.p = netproxy.New(sp, netproxy.Options{})
	n.proxies[theirs] = sp
	n.mu.Unlock()
	for _, l := range ls {
		if l.target == nil {
			go sp.p.Serve(l.ln)
		} else {
			go sp.p.ServeForward(l.ln, *l.target)
		}
	}
	n.log.Info().Str("session", sess.ID).Str("proxy", proxyAddr).Str("netns", theirs).Int("listeners", len(ls)).Msg("session network: proxy serving")
	return nil
}

// forwardTarget is the host endpoint a forward listener at addr relays
// to: a loopback model endpoint of the session, at the same address.
func forwardTarget(addr string, model []policy.HostPattern) (*netproxy.Target, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(p)
	ip := net.ParseIP(h)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("forward %s: only loopback model endpoints are forwarded", addr)
	}
	host, _ := policy.NormalHost(h)
	for _, m := range model {
		if m.Match(host, port) {
			return &netproxy.Target{Host: host, Port: port}, nil
		}
	}
	return nil, fmt.Errorf("forward %s: not a model endpoint of the session", addr)
}

// Decide decides a connection of the session (netproxy.Session).
func (sp *sessionProxy) Decide(t netproxy.Target) netproxy.Decision {
	pol := sp.n.m.Policy()
	ch, why := pol.HostChannel(t.Host, t.Port, sp.model)
	v := pol.DecideConnect(sp.sess.Taint(), ch)
	d := netproxy.Decision{Allow: v.Allow, Channel: ch.String(), Rule: v.Rule.ID(), Reason: v.Rule.Reason(), Why: why, Taints: v.AddTaint != 0}
	switch v.Rule {
	case policy.RuleNetSecret:
		d.Hint = "the owner can name " + t.Host + " trusted in the policy's network.hosts, or set network.secret_egress: allow"
	case policy.RuleNetDeny:
		d.Hint = "the policy's network.hosts names " + t.Host + " deny (" + why + ")"
	}
	return d
}

// DecideAddr refuses an address of the daemon's own host (loopback,
// link-local, its interfaces) for a host that neither the policy nor the
// session's model endpoint names (RN-local), whatever name led to it
// (netproxy.Session).
func (sp *sessionProxy) DecideAddr(t netproxy.Target, d netproxy.Decision, a netip.Addr) netproxy.Decision {
	_, _, named := sp.n.m.Policy().HostChannelNamed(t.Host, t.Port, sp.model)
	if !policy.LocalDenied(named, a, hostAddrs()) {
		return d
	}
	r := policy.RuleNetLocal
	why := d.Why
	if a.String() != t.Host {
		why += "; " + t.Host + " resolved to " + a.String()
	}
	return netproxy.Decision{Channel: d.Channel, Rule: r.ID(), Reason: r.Reason(), Why: why + "; an address of the daemon's host",
		Hint: "the owner can name " + net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) + " in the policy's network.hosts (channel web or trusted) to let sessions reach it"}
}

// hostAddrs are the addresses of the daemon's network interfaces, read
// again at most once a second.
func hostAddrs() []netip.Addr {
	hostAddrCache.mu.Lock()
	defer hostAddrCache.mu.Unlock()
	if time.Since(hostAddrCache.at) < time.Second && hostAddrCache.addrs != nil {
		return hostAddrCache.addrs
	}
	as, err := net.InterfaceAddrs()
	out := []netip.Addr{}
	if err == nil {
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out = append(out, p.Addr().Unmap())
			}
		}
	}
	hostAddrCache.addrs, hostAddrCache.at = out, time.Now()
	return out
}

var hostAddrCache struct {
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}

// Taint taints the session by what a web host sends, before its first
// byte is relayed (netproxy.Session).
func (sp *sessionProxy) Taint(t netproxy.Target) {
	added := policy.OriginTaint(policy.Web)
	if !sp.sess.AddTaint(added) {
		return
	}
	id := sp.n.append(&evidence.Record{Type: evidence.TypeTaint, Principal: sp.sess.Principal.String(), Taint: added.Names(),
		Meta: evidence.Meta{Session: sp.sess.ID, Op: t.Op, UID: sp.uid,
			Reason: "tainted by " + t.Host + " via the proxy"},
		Payload: &evidence.Payload{Detail: "port " + strconv.Itoa(t.Port)}})
	if id != "" {
		sp.n.m.TaintedBy(sp.sess.ID, id)
	}
}

// Done records a connection (netproxy.Session).
func (sp *sessionProxy) Done(c *netproxy.Conn) {
	verdict := "deny"
	if c.Decision.Allow {
		verdict = "allow"
	}
	reason := c.Decision.Reason
	detail := c.Decision.Why
	if c.Err != "" {
		detail += "; " + c.Err
	}
	dur := c.End.Sub(c.Start).Microseconds()
	sp.n.append(&evidence.Record{Type: evidence.TypeNet, Principal: sp.sess.Principal.String(), Taint: nonNil(sp.sess.Taint().Names()),
		Meta: evidence.Meta{Session: sp.sess.ID, Op: c.Target.Op, Verdict: verdict, Rule: c.Decision.Rule, Reason: reason, UID: sp.uid},
		Payload: &evidence.Payload{Detail: detail, Net: &evidence.NetConn{Host: c.Target.Host, Port: c.Target.Port,
			Channel: c.Decision.Channel, Sent: c.Sent, Received: c.Received, DurationUS: max(dur, 0)}}})
	key := c.Target.Addr()
	sp.n.mu.Lock()
	hs := sp.n.hosts[sp.sess.ID]
	if hs == nil {
		hs = map[string]*NetHost{}
		sp.n.hosts[sp.sess.ID] = hs
	}
	h := hs[key]
	if h == nil {
		if len(hs) >= maxStatusHosts {
			sp.n.mu.Unlock()
			return
		}
		h = &NetHost{Host: c.Target.Host, Port: c.Target.Port}
		hs[key] = h
	}
	h.Channel, h.Rule = c.Decision.Channel, c.Decision.Rule
	switch {
	case c.Decision.Allow && c.Err != "" && c.Sent == 0 && c.Received == 0:
		h.Failed++
	case c.Decision.Allow:
		h.Conns++
	default:
		h.Refused++
	}
	h.Sent += c.Sent
	h.Received += c.Received
	sp.n.mu.Unlock()
}

// maxStatusHosts bounds the hosts aerfs status lists per session (the log
// has every connection).
const maxStatusHosts = 256

// append queues r for the next group commit: like a verdict, a connection
// record does not wait for a disk flush.
func (n *sessionNets) append(r *evidence.Record) string {
	if r.Parents == nil {
		r.Parents = []string{}
	}
	if r.Taint == nil {
		r.Taint = []string{}
	}
	r.Meta.Time = evidence.FormatTime(time.Now())
	id, err := n.rec.AppendAsync(r, func(err error) {
		n.log.Error().Err(err).Str("type", r.Type).Msg("evidence append failed")
	})
	if err != nil {
		n.log.Error().Err(err).Str("type", r.Type).Msg("evidence append failed")
	}
	return id
}

// describe is a session's network for aerfs status, and the hosts it
// reached, most used first.
func (n *sessionNets) describe(id string) (string, []NetHost) {
	n.mu.Lock()
	defer n.mu.Unlock()
	plan, ok := n.plans[id]
	var mode string
	switch {
	case !ok:
		mode = "unknown (registered before this mount)"
	default:
		mode = plan.detail(n.m.Policy())
		if plan.mode == "proxy" && plan.parent == "" {
			var addrs []string
			for _, sp := range n.proxies {
				if sp.sess.ID == id {
					addrs = append(addrs, sp.addr)
				}
			}
			sort.Strings(addrs)
			if len(addrs) == 0 {
				mode += "; no proxy serving (its aerfs run handed none over, or every process of it has ended)"
			} else {
				mode += "; serving at http://" + strings.Join(addrs, ", http://") + " in its own network namespace"
			}
		}
	}
	var hs []NetHost
	for _, h := range n.hosts[id] {
		hs = append(hs, *h)
	}
	sort.Slice(hs, func(i, j int) bool {
		if a, b := hs[i].Conns+hs[i].Refused+hs[i].Failed, hs[j].Conns+hs[j].Refused+hs[j].Failed; a != b {
			return a > b
		}
		return hs[i].Host < hs[j].Host || hs[i].Host == hs[j].Host && hs[i].Port < hs[j].Port
	})
	return mode, hs
}

// forget drops the plan and the hosts of the retired session id (its
// proxies went with its last process: reap).
func (n *sessionNets) forget(id string) {
	n.mu.Lock()
	delete(n.plans, id)
	delete(n.hosts, id)
	n.mu.Unlock()
}

// reap closes the proxies whose namespace no process is in any more (every
// process of that aerfs run has ended): their descriptors would keep the
// namespace alive for nothing.
func (n *sessionNets) reap() {
	n.mu.Lock()
	if len(n.proxies) == 0 {
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	inUse := map[string]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns/net")); err == nil {
			inUse[l] = true
		}
	}
	var gone []*sessionProxy
	n.mu.Lock()
	for ns, sp := range n.proxies {
		if !inUse[ns] && time.Since(sp.started) > time.Second {
			gone = append(gone, sp)
			delete(n.proxies, ns)
		}
	}
	n.mu.Unlock()
	for _, sp := range gone {
		sp.p.Close()
		n.log.Info().Str("session", sp.sess.ID).Str("netns", sp.netns).Msg("session network: proxy closed, no process left in its namespace")
	}
}

// close stops every proxy (at unmount, before the log closes).
func (n *sessionNets) close() {
	n.mu.Lock()
	ps := n.proxies
	n.proxies = map[string]*sessionProxy{}
	n.mu.Unlock()
	for _, sp := range ps {
		sp.p.Close()
	}
}
