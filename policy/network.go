package policy

// The network of a confined session: every connection leaves through the
// daemon's proxy, which asks this file what the host is (its channel) and
// whether the session may reach it. Pure, like Decide.

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// NetChannel is what a network host is to a session.
type NetChannel uint8

const (
	// ChannelWeb is every host no entry names: what it sends taints the
	// session UNTRUSTED|WEB_DERIVED, as reading a file a WEB process wrote.
	ChannelWeb NetChannel = iota
	// ChannelModel is the model API the agent's client talks to: the
	// session's own conversation, which does not taint.
	ChannelModel
	// ChannelTrusted is a host the owner vouches for (an internal docs
	// server, a package mirror): it does not taint.
	ChannelTrusted
	// ChannelDeny is a host no session may connect to.
	ChannelDeny
	numChannels
)

var channelNames = [numChannels]string{"web", "model", "trusted", "deny"}

func (c NetChannel) String() string {
	if c < numChannels {
		return channelNames[c]
	}
	return "invalid"
}

// ParseNetChannel reads a channel name.
func ParseNetChannel(s string) (NetChannel, error) {
	for c, n := range channelNames {
		if n == s {
			return NetChannel(c), nil
		}
	}
	return 0, fmt.Errorf("unknown channel %q (channels are model, trusted, deny, web)", s)
}

// HostPattern matches the host and port a session asks its proxy for.
//
//	example.org         that host, any port
//	example.org:443     that host and port
//	*.example.org       every name below example.org (not example.org itself)
//	127.0.0.1:8080      an address and port; [::1]:8080 for IPv6
//	*                   every host (with :PORT, every host on that port)
//
// Names are compared case-insensitively, without a trailing dot.
type HostPattern struct {
	src    string
	host   string // lowercase; "" with any; the suffix ".example.org" with sub
	sub    bool   // *.host
	any    bool   // *
	port   int    // 0: any port
	ipAddr bool   // host is an IP address literal (normalised)
}

// String is the pattern as written.
func (h HostPattern) String() string { return h.src }

// ParseHostPattern reads a host pattern; the error says what is wrong in
// words a policy author can act on.
func ParseHostPattern(s string) (HostPattern, error) {
	p := HostPattern{src: s}
	if s == "" {
		return p, fmt.Errorf("is empty")
	}
	if strings.ContainsAny(s, " \t/@?#") || strings.Contains(s, "://") {
		return p, fmt.Errorf("is not a host pattern (write a host name or address, with :PORT if you mean one port; no scheme, path or user)")
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return p, err
	}
	if port != "" && port != "*" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return p, fmt.Errorf("has port %q, not a number from 1 to 65535", port)
		}
		p.port = n
	}
	switch {
	case host == "*":
		p.any = true
		return p, nil
	case strings.HasPrefix(host, "*."):
		p.sub = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return p, fmt.Errorf("has a wildcard inside a name (only a leading \"*.\" or \"*\" alone)")
	}
	h, isIP, err := normalHost(host)
	if err != nil {
		return p, err
	}
	if p.sub && isIP {
		return p, fmt.Errorf("puts \"*.\" before an address")
	}
	p.host, p.ipAddr = h, isIP
	if p.sub {
		p.host = "." + h
	}
	return p, nil
}

// splitHostPort splits "host", "host:port", "[v6]", "[v6]:port" and a bare
// IPv6 address.
func splitHostPort(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", fmt.Errorf("opens \"[\" without closing it")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", fmt.Errorf("has %q after the address", rest)
		}
		return host, rest[1:], nil
	}
	if strings.Count(s, ":") > 1 {
		return s, "", nil // a bare IPv6 address
	}
	host, port, _ = strings.Cut(s, ":")
	if strings.HasSuffix(s, ":") {
		return "", "", fmt.Errorf("ends with \":\" and no port")
	}
	return host, port, nil
}

// normalHost lowercases a name and drops a trailing dot, or normalises an
// address; it refuses what is neither.
func normalHost(h string) (string, bool, error) {
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", false, fmt.Errorf("has an IPv6 zone")
		}
		return a.Unmap().String(), true, nil
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > 253 {
		return "", false, fmt.Errorf("is not a host name")
	}
	labels := strings.Split(h, ".")
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		// A resolver reads 127.1, 0177.0.0.1 or 2130706433 as an
		// address: a name never ends in a numeric label.
		return "", false, fmt.Errorf("is neither an address in normal form nor a host name")
	}
	for _, label := range labels {
		if label == "" || len(label) > 63 {
			return "", false, fmt.Errorf("has an empty or over-long label")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false, fmt.Errorf("has %q, not a letter, digit, '-' or '_'", string(c))
			}
		}
	}
	return h, false, nil
}

// NormalHost is the form Match compares: a lowercase name without a
// trailing dot, or an address in its normal form ("::1", "127.0.0.1"). ok
// is false for what is neither.
func NormalHost(h string) (string, bool) {
	n, _, err := normalHost(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	return n, err == nil
}

// Match reports whether the pattern covers host (in NormalHost form) on
// port.
func (h HostPattern) Match(host string, port int) bool {
	if h.port != 0 && h.port != port {
		return false
	}
	switch {
	case h.any:
		return true
	case h.sub:
		return strings.HasSuffix(host, h.host)
	}
	return host == h.host
}

// HostRule is one entry of network.hosts.
type HostRule struct {
	Pattern HostPattern
	Channel NetChannel
}

// networkSpec is the network key.
type networkSpec struct {
	hosts        []HostRule
	hasHosts     bool
	secretEgress bool // true: a SECRET_RISK session may reach web hosts
	hasSecret    bool
}

// NetworkMode is sandbox.network: how a confined session reaches the
// network.
type NetworkMode uint8

const (
	// NetworkProxy: a network namespace of its own with only loopback; its
	// one way out is the daemon's proxy.
	NetworkProxy NetworkMode = iota
	// NetworkOpen: the host's network, unfiltered and unrecorded (the
	// owner's explicit opt-out).
	NetworkOpen
)

func (m NetworkMode) String() string {
	if m == NetworkOpen {
		return "open"
	}
	return "proxy"
}

func (ps *parser) network(n *yaml.Node, s *spec) error {
	return ps.mapping(n, []string{"hosts", "secret_egress"}, func(key string, _, v *yaml.Node) error {
		if key == "secret_egress" {
			val, err := ps.str(v, "network.secret_egress")
			if err != nil {
				return err
			}
			switch val {
			case "restrict":
				s.network.secretEgress = false
			case "allow":
				s.network.secretEgress = true
			default:
				return ps.errf(v, "write secret_egress: restrict (a session that read a secret reaches only model and trusted hosts) or allow", "unknown network.secret_egress %q", val)
			}
			s.network.hasSecret = true
			return nil
		}
		items, err := ps.list(v, "network.hosts")
		if err != nil {
			return err
		}
		s.network.hasHosts = true
		s.network.hosts = []HostRule{}
		seen := map[string]int{}
		for _, it := range items {
			var r HostRule
			var matchNode *yaml.Node
			err := ps.entry(it, []string{"match", "channel"}, func(key string, v *yaml.Node) error {
				src, err := ps.str(v, key)
				if err != nil {
					return err
				}
				if key == "channel" {
					c, err := ParseNetChannel(src)
					if err != nil {
						return ps.errf(v, "channels are model, trusted, deny and web", "unknown channel %q", src)
					}
					r.Channel = c
					return nil
				}
				matchNode = v
				pt, err := ParseHostPattern(src)
				if err != nil {
					return ps.errf(v, `write a host such as api.example.org, *.example.org, example.org:8443 or 127.0.0.1:8080`, "network.hosts match %q %v", src, err)
				}
				r.Pattern = pt
				return nil
			})
			if err != nil {
				return err
			}
			key := r.Pattern.canonical()
			if line, dup := seen[key]; dup {
				return ps.errf(matchNode, fmt.Sprintf("remove one of the two; the first is on line %d", line), "network.hosts match %q listed twice", r.Pattern.src)
			}
			seen[key] = matchNode.Line
			s.network.hosts = append(s.network.hosts, r)
		}
		return nil
	})
}

func (h HostPattern) canonical() string {
	switch {
	case h.any:
		return "*:" + strconv.Itoa(h.port)
	case h.sub:
		return "*" + h.host + ":" + strconv.Itoa(h.port)
	}
	return h.host + ":" + strconv.Itoa(h.port)
}

func mergeNetwork(s, base *spec) {
	if base == nil {
		return
	}
	if !s.network.hasHosts {
		s.network.hosts, s.network.hasHosts = base.network.hosts, base.network.hasHosts
	}
	if !s.network.hasSecret {
		s.network.secretEgress = base.network.secretEgress
	}
}

// NetworkHosts is network.hosts, in order.
func (p *Policy) NetworkHosts() []HostRule { return p.hosts }

// SandboxNetwork is sandbox.network.
func (p *Policy) SandboxNetwork() NetworkMode { return p.netMode }

// SecretEgress reports whether network.secret_egress allows a session that
// read a secret to reach web hosts.
func (p *Policy) SecretEgress() bool { return p.secretEgress }

// HostChannel says what host (NormalHost form) on port is to a session
// whose client was started with the model endpoints model: the first
// network.hosts entry that matches decides; else a model endpoint of the
// session is model; else the host is web. why names the entry, for the
// record.
func (p *Policy) HostChannel(host string, port int, model []HostPattern) (c NetChannel, why string) {
	c, why, _ = p.HostChannelNamed(host, port, model)
	return c, why
}

// HostChannelNamed is HostChannel, and whether the host is named: the
// deciding entry is not "*" (every host), or the host is a model endpoint
// of the session. Only a named host may resolve to an address of the
// daemon's own host (LocalDenied).
func (p *Policy) HostChannelNamed(host string, port int, model []HostPattern) (c NetChannel, why string, named bool) {
	for _, r := range p.hosts {
		if r.Pattern.Match(host, port) {
			return r.Channel, "network.hosts " + r.Pattern.src, !r.Pattern.any
		}
	}
	for _, m := range model {
		if m.Match(host, port) {
			return ChannelModel, "the session's model endpoint " + m.src, true
		}
	}
	return ChannelWeb, "no network.hosts entry (web by default)", false
}

// LocalAddr reports whether a reaches the daemon's own host or its link
// rather than a host elsewhere: loopback, the unspecified address (which
// connects to the host itself), link-local addresses (169.254.169.254, a
// cloud's metadata service, among them), or one of own, the host's
// interface addresses. The proxy dials from the host: through it, a
// session would reach the owner's loopback services (a notebook kernel, an
// editor's server, a browser's debugging port) that its own network
// namespace keeps it from.
func LocalAddr(a netip.Addr, own []netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return true
	}
	for _, o := range own {
		if o.Unmap() == a {
			return true
		}
	}
	return false
}

// LocalDenied decides the address a session's host resolved to, just
// before the proxy dials it: a local address (LocalAddr) is refused
// (RN-local) unless the host is named (HostChannelNamed). A name that
// resolves to 127.0.0.1 is refused as the address itself is.
func LocalDenied(named bool, a netip.Addr, own []netip.Addr) bool {
	return !named && LocalAddr(a, own)
}

// DecideConnect decides a session's connection to a host of channel c,
// the session carrying taint t. An allowed connection to a web host adds
// UNTRUSTED|WEB_DERIVED (AddTaint) once its first byte arrives: the same
// taint as reading a file a WEB process wrote.
//
//	RN-deny    the policy names the host deny
//	RN-secret  a session that read a secret reaches only model and trusted
//	           hosts (network.secret_egress: restrict, the default)
//	RN-model, RN-trusted, RN-web   allowed
func (p *Policy) DecideConnect(t Taint, c NetChannel) Verdict {
	switch c {
	case ChannelModel:
		return Verdict{Allow: true, Rule: RuleNetModel}
	case ChannelTrusted:
		return Verdict{Allow: true, Rule: RuleNetTrusted}
	case ChannelWeb:
		if t&SecretRisk != 0 && !p.secretEgress {
			return deny(RuleNetSecret)
		}
		return Verdict{Allow: true, Rule: RuleNetWeb, AddTaint: OriginTaint(Web)}
	}
	return deny(RuleNetDeny)
}
