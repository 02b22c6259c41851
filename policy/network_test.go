package policy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestHostPatternMatch(t *testing.T) {
	for _, c := range []struct {
		pat  string
		host string
		port int
		want bool
	}{
		{"example.org", "example.org", 443, true},
		{"example.org", "example.org", 80, true},
		{"Example.ORG.", "example.org", 80, true},
		{"example.org", "www.example.org", 443, false},
		{"example.org", "badexample.org", 443, false},
		{"example.org:443", "example.org", 443, true},
		{"example.org:443", "example.org", 8443, false},
		{"example.org:*", "example.org", 8443, true},
		{"*.example.org", "a.example.org", 1, true},
		{"*.example.org", "a.b.example.org", 1, true},
		{"*.example.org", "example.org", 1, false},
		{"*.example.org", "aexample.org", 1, false},
		{"*.example.org:443", "a.example.org", 80, false},
		{"*", "anything", 9, true},
		{"*:443", "anything", 443, true},
		{"*:443", "anything", 80, false},
		{"127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"127.0.0.1:8080", "127.0.0.1", 8081, false},
		{"127.0.0.1", "127.0.0.2", 80, false},
		{"[::1]:8080", "::1", 8080, true},
		{"::1", "::1", 1, true},
		{"[0:0::1]", "::1", 1, true},
		{"::ffff:127.0.0.1", "127.0.0.1", 1, true},
	} {
		p, err := ParseHostPattern(c.pat)
		if err != nil {
			t.Errorf("%q: %v", c.pat, err)
			continue
		}
		if got := p.Match(c.host, c.port); got != c.want {
			t.Errorf("%q matches %s:%d = %v, want %v", c.pat, c.host, c.port, got, c.want)
		}
	}
}

func TestHostPatternErrors(t *testing.T) {
	for _, c := range []struct{ pat, want string }{
		{"", "is empty"},
		{"http://example.org", "is not a host pattern"},
		{"example.org/path", "is not a host pattern"},
		{"user@example.org", "is not a host pattern"},
		{"exa mple.org", "is not a host pattern"},
		{"example.org:0", "not a number from 1 to 65535"},
		{"example.org:65536", "not a number from 1 to 65535"},
		{"example.org:08", "not a number"},
		{"example.org:http", "not a number"},
		{"example.org:", "ends with"},
		{"a.*.org", "wildcard inside a name"},
		{"*example.org", "wildcard inside a name"},
		{"*.127.0.0.1", "before an address"},
		{"[::1", "without closing"},
		{"[::1]x", "after the address"},
		{"fe80::1%eth0", "zone"},
		{"a..b", "empty or over-long label"},
		{"ex!ample.org", "not a letter"},
		{"127.000.0.1", "neither an address in normal form nor a host name"},
		{"2130706433", "neither"},
		{"0x7f.1", "neither"},
		{strings.Repeat("a", 64) + ".org", "over-long"},
	} {
		_, err := ParseHostPattern(c.pat)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want …%s…", c.pat, err, c.want)
		}
	}
}

func TestNormalHost(t *testing.T) {
	for in, want := range map[string]string{
		"Example.Org.": "example.org", "[::1]": "::1", "127.000.0.1": "", "::ffff:10.0.0.1": "10.0.0.1", "a_b.c": "a_b.c",
	} {
		got, ok := NormalHost(in)
		if want == "" {
			if ok {
				t.Errorf("NormalHost(%q) accepted %q", in, got)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("NormalHost(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := NormalHost("bad host"); ok {
		t.Error("a name with a space is a host")
	}
}

func TestNetworkDefaults(t *testing.T) {
	p := Default()
	if p.SandboxNetwork() != NetworkProxy {
		t.Errorf("default sandbox.network = %v, want proxy", p.SandboxNetwork())
	}
	if p.SecretEgress() {
		t.Error("default secret_egress allows a SECRET_RISK session to reach web hosts")
	}
	for _, h := range []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"} {
		if c, _ := p.HostChannel(h, 443, nil); c != ChannelModel {
			t.Errorf("%s is %v by default, want model", h, c)
		}
	}
	if c, why := p.HostChannel("example.org", 443, nil); c != ChannelWeb || !strings.Contains(why, "web by default") {
		t.Errorf("example.org = %v (%s), want web", c, why)
	}
	m, _ := ParseHostPattern("127.0.0.1:4000")
	if c, why := p.HostChannel("127.0.0.1", 4000, []HostPattern{m}); c != ChannelModel || !strings.Contains(why, "model endpoint 127.0.0.1:4000") {
		t.Errorf("the session's model endpoint = %v (%s)", c, why)
	}
	if c, _ := p.HostChannel("127.0.0.1", 4001, []HostPattern{m}); c != ChannelWeb {
		t.Errorf("another port of the model endpoint's host = %v, want web", c)
	}
}

func TestNetworkPolicy(t *testing.T) {
	src := `version: 1
sandbox: {network: open}
network:
  hosts:
    - {match: docs.internal, channel: trusted}
    - {match: "*.evil.example", channel: deny}
    - {match: "127.0.0.1:4000", channel: web}
    - {match: "*", channel: web}
    - {match: never.reached, channel: model}
  secret_egress: allow
`
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p.SandboxNetwork() != NetworkOpen || !p.SecretEgress() {
		t.Errorf("network: open / secret_egress: allow not read")
	}
	m, _ := ParseHostPattern("127.0.0.1:4000")
	for _, c := range []struct {
		host string
		port int
		want NetChannel
	}{
		{"docs.internal", 80, ChannelTrusted},
		{"a.evil.example", 443, ChannelDeny},
		// An entry names the session's model endpoint: the entry wins.
		{"127.0.0.1", 4000, ChannelWeb},
		{"never.reached", 443, ChannelWeb},
		// The list replaces the default one.
		{"api.anthropic.com", 443, ChannelWeb},
	} {
		if got, _ := p.HostChannel(c.host, c.port, []HostPattern{m}); got != c.want {
			t.Errorf("%s:%d = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	// A file that does not set network keeps the default hosts and the
	// strict secret egress; sandbox without network keeps proxy.
	q, err := Parse("p.yaml", []byte("version: 1\nsandbox: {private_tmp: true}\nnetwork: {secret_egress: allow}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if q.SandboxNetwork() != NetworkProxy || len(q.NetworkHosts()) != 3 || !q.SecretEgress() {
		t.Errorf("merge: mode %v, %d hosts, secret egress %v", q.SandboxNetwork(), len(q.NetworkHosts()), q.SecretEgress())
	}
	q, _ = Parse("p.yaml", []byte("version: 1\nnetwork: {hosts: []}\n"))
	if len(q.NetworkHosts()) != 0 || q.SecretEgress() {
		t.Errorf("hosts: [] is not empty, or secret egress changed")
	}
}

func TestNetworkErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"network:\n  host: []\n", `p.yaml:3: unknown key "host"`},
		{"network:\n  hosts: [{match: a.org}]\n", `p.yaml:3: entry without channel`},
		{"network:\n  hosts: [{channel: web}]\n", `p.yaml:3: entry without match`},
		{"network:\n  hosts: [{match: a.org, channel: untrusted}]\n", `p.yaml:3: unknown channel "untrusted"`},
		{"network:\n  hosts: [{match: a.org, channel: web, port: 1}]\n", `p.yaml:3: unknown key "port"`},
		{"network:\n  hosts:\n    - {match: \"https://a.org\", channel: web}\n", `p.yaml:4: network.hosts match "https://a.org" is not a host pattern`},
		{"network:\n  hosts:\n    - {match: a.org, channel: web}\n    - {match: A.org., channel: deny}\n", `p.yaml:5: network.hosts match "A.org." listed twice`},
		{"network:\n  hosts: [{match: 443, channel: web}]\n", `p.yaml:3: match must be a string`},
		{"network:\n  hosts: a.org\n", `p.yaml:3: network.hosts must be a list`},
		{"network:\n  secret_egress: true\n", `p.yaml:3: network.secret_egress must be a string`},
		{"network:\n  secret_egress: open\n", `p.yaml:3: unknown network.secret_egress "open"`},
		{"network: [a.org]\n", `p.yaml:2: expected a mapping`},
		{"sandbox:\n  network: closed\n", `p.yaml:3: unknown sandbox.network "closed"`},
	} {
		_, err := Parse("p.yaml", []byte("version: 1\n"+c.src))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %s…", c.src, err, c.want)
		}
		if pe, ok := err.(*Error); ok && pe.Hint == "" {
			t.Errorf("%q: no hint", c.src)
		}
	}
}

// TestDecideConnectExhaustive enumerates every taint set, channel and
// secret_egress setting: deny is always refused, a SECRET_RISK session
// reaches a web host only when the policy allows it, model and trusted never
// taint, web always taints with the taint of WEB-written content, and more
// taint never turns a refusal into an allowance.
func TestDecideConnectExhaustive(t *testing.T) {
	strict := Default()
	open, err := Parse("p.yaml", []byte("version: 1\nnetwork: {secret_egress: allow}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Policy{strict, open} {
		for c := NetChannel(0); c <= numChannels; c++ {
			for tt := Taint(0); tt <= AllTaint; tt++ {
				v := p.DecideConnect(tt, c)
				if v.Rule == RuleUnset || v.Rule >= numRules {
					t.Fatalf("%v %v: no rule", c, tt)
				}
				switch {
				case c >= numChannels || c == ChannelDeny:
					if v.Allow || v.Rule != RuleNetDeny {
						t.Fatalf("%v: %v", c, v)
					}
				case c == ChannelWeb && tt&SecretRisk != 0 && !p.SecretEgress():
					if v.Allow || v.Rule != RuleNetSecret {
						t.Fatalf("secret web strict: %v", v)
					}
				case c == ChannelWeb:
					if !v.Allow || v.Rule != RuleNetWeb || v.AddTaint != OriginTaint(Web) {
						t.Fatalf("web: %v", v)
					}
				default:
					if !v.Allow || v.AddTaint != 0 {
						t.Fatalf("%v: %v", c, v)
					}
				}
				// Monotonic in taint.
				for extra := Taint(1); extra <= AllTaint; extra <<= 1 {
					if w := p.DecideConnect(tt|extra, c); w.Allow && !v.Allow {
						t.Fatalf("more taint (%v) allowed %v to %v", extra, tt, c)
					}
				}
			}
		}
	}
	if got := strings.Join([]string{RuleNetModel.ID(), RuleNetTrusted.ID(), RuleNetWeb.ID(), RuleNetDeny.ID(), RuleNetSecret.ID()}, " "); got != "RN-model RN-trusted RN-web RN-deny RN-secret" {
		t.Errorf("rule ids %s", got)
	}
	for c := NetChannel(0); c < numChannels; c++ {
		if back, err := ParseNetChannel(c.String()); err != nil || back != c {
			t.Errorf("channel %v does not round-trip", c)
		}
	}
}

// FuzzHostPattern: ParseHostPattern never panics; a pattern that parses
// matches the host it names (when it names one) and is stable under
// re-parsing its own text.
func FuzzHostPattern(f *testing.F) {
	for _, s := range []string{"example.org", "*.example.org:443", "[::1]:8080", "127.0.0.1", "*", "*:80", "a..b", "x:99999", "[::1"} {
		f.Add(s, "example.org", 443)
	}
	f.Fuzz(func(t *testing.T, pat, host string, port int) {
		p, err := ParseHostPattern(pat)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if q, err := ParseHostPattern(p.String()); err != nil || q.canonical() != p.canonical() {
			t.Fatalf("%q does not re-parse: %v", pat, err)
		}
		if !p.any && !p.sub {
			port := p.port
			if port == 0 {
				port = 1
			}
			if !p.Match(p.host, port) {
				t.Fatalf("%q does not match its own host %q", pat, p.host)
			}
		}
		if h, ok := NormalHost(host); ok {
			p.Match(h, port)
		}
	})
}

// The proxy refuses the host's own addresses to a host the policy does not
// name, and only then.
func TestLocalDenied(t *testing.T) {
	p, err := Parse("p.yaml", []byte("version: 1\nnetwork:\n  hosts:\n    - {match: 127.0.0.1:8080, channel: web}\n    - {match: dev.local, channel: trusted}\n    - {match: '*:9000', channel: web}\n"))
	if err != nil {
		t.Fatal(err)
	}
	own := []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::5")}
	mp, err := ParseHostPattern("[::1]:7000")
	if err != nil {
		t.Fatal(err)
	}
	model := []HostPattern{mp}
	for _, c := range []struct {
		host  string
		port  int
		addr  string
		local bool
		deny  bool
	}{
		{"127.0.0.1", 8080, "127.0.0.1", true, false},       // named
		{"127.0.0.1", 8081, "127.0.0.1", true, true},        // another port: not named
		{"dev.local", 80, "10.1.2.3", true, false},          // named, own address
		{"evil.example", 80, "127.0.0.2", true, true},       // a name resolving to loopback
		{"evil.example", 9000, "127.0.0.1", true, true},     // "*" names nothing
		{"evil.example", 80, "169.254.169.254", true, true}, // link-local: metadata
		{"evil.example", 80, "0.0.0.0", true, true},
		{"evil.example", 80, "::ffff:127.0.0.1", true, true},
		{"evil.example", 80, "fe80::1", true, true},
		{"evil.example", 80, "10.1.2.3", true, true},    // the host's interface
		{"evil.example", 80, "2001:db8::5", true, true}, // the host's interface
		{"evil.example", 80, "10.1.2.4", false, false},  // another host of the LAN
		{"evil.example", 80, "93.184.216.34", false, false},
		{"::1", 7000, "::1", true, false}, // the session's model endpoint
	} {
		a := netip.MustParseAddr(c.addr)
		_, _, named := p.HostChannelNamed(c.host, c.port, model)
		if got := LocalAddr(a, own); got != c.local {
			t.Errorf("LocalAddr(%s) = %v, want %v", c.addr, got, c.local)
		}
		if got := LocalDenied(named, a, own); got != c.deny {
			t.Errorf("%s:%d at %s: LocalDenied = %v, want %v", c.host, c.port, c.addr, got, c.deny)
		}
	}
}
