package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/sandbox"
)

// The network parts of aerfs run (docs/confinement.md, "The network"): the
// session's own network namespace with only loopback, the proxy's listening
// socket opened in it and handed to the daemon, and the environment that
// points clients at it.

// netNSEnv tells the copy of aerfs run started in the session's new
// namespaces the network namespace of its parent (to tell that it is in a
// new one).
const netNSEnv = "AERFS_RUN_PARENT_NETNS"

// modelEnv are the variables clients take their model endpoint from: the
// host each names is the session's model channel unless the policy names
// it otherwise.
var modelEnv = []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "OLLAMA_HOST"}

// networkMode asks the daemon how sessions reach the network ("proxy" or
// "open"); a daemon too old to say gets "open" (it has no proxy).
func networkMode(t *target) string {
	resp, err := daemon.Call(t.stateDir, daemon.Request{Op: "network-mode"})
	if err != nil || !resp.OK {
		return "open"
	}
	var d struct{ Network string }
	json.Unmarshal(resp.Data, &d)
	if d.Network != "proxy" {
		return "open"
	}
	return d.Network
}

// modelEndpoint is host:port of a base URL ("http://127.0.0.1:4000/v1",
// "https://api.example.org", or OLLAMA_HOST's "127.0.0.1:11434").
func modelEndpoint(raw string) (string, bool) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	host, ok := policy.NormalHost(u.Hostname())
	if !ok {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", false
	}
	return net.JoinHostPort(host, port), true
}

// modelEndpoints are the session's model endpoints: --model URLs, then the
// base URLs of the environment.
func modelEndpoints(flags []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(ep string) {
		if !seen[ep] && len(out) < 16 {
			seen[ep] = true
			out = append(out, ep)
		}
	}
	for _, f := range flags {
		ep, ok := modelEndpoint(f)
		if !ok {
			return nil, fail(exitUsage, "write --model as the client's base URL, e.g. --model http://127.0.0.1:4000/v1", "--model %q is not an http:// or https:// URL", f)
		}
		add(ep)
	}
	for _, k := range modelEnv {
		if ep, ok := modelEndpoint(os.Getenv(k)); ok && os.Getenv(k) != "" {
			add(ep)
		}
	}
	return out, nil
}

// sessionNet is the network of the session aerfs run starts.
type sessionNet struct {
	mode      string   // "proxy", "open", "" (inside a session: its parent's)
	model     []string // host:port
	files     []*os.File
	listeners []string // "proxy ADDR", "forward ADDR", one per file
	proxy     string   // http://ADDR
}

// prepareNet runs in the copy of aerfs run inside the session's new network
// namespace: loopback up, a forward listener for each model endpoint on
// the host's loopback (at the same address: a client that never proxies
// loopback addresses reaches its model), and the proxy's listener.
func prepareNet(model []string) (*sessionNet, error) {
	n := &sessionNet{mode: "proxy", model: model}
	if err := sandbox.LoopbackUp(); err != nil {
		return nil, err
	}
	for _, ep := range model {
		h, _, _ := net.SplitHostPort(ep)
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			continue
		}
		f, addr, err := sandbox.ListenLoopback(ep)
		if err != nil {
			continue // the client reaches it through the proxy
		}
		n.files = append(n.files, f)
		n.listeners = append(n.listeners, "forward "+addr)
	}
	f, addr, err := sandbox.ListenLoopback("127.0.0.1:0")
	if err != nil {
		n.close()
		return nil, err
	}
	// The proxy's listener goes first.
	n.files = append([]*os.File{f}, n.files...)
	n.listeners = append([]string{"proxy " + addr}, n.listeners...)
	n.proxy = "http://" + addr
	return n, nil
}

func (n *sessionNet) close() {
	for _, f := range n.files {
		f.Close()
	}
	n.files = nil
}

// env points the session's clients at the proxy. NO_PROXY is emptied: in
// the session, 127.0.0.1 is the session's own loopback, and the host's is
// reached through the proxy like any other host.
func (n *sessionNet) env() []string {
	switch {
	case n == nil || n.mode == "":
		return nil // a session started from within one keeps its parent's
	case n.mode == "open":
		return []string{"AERFS_NETWORK=open"}
	}
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+n.proxy, strings.ToLower(k)+"="+n.proxy)
	}
	return append(env, "NO_PROXY=", "no_proxy=",
		"NODE_USE_ENV_PROXY=1", // Node's own fetch and http (Node ≥ 24)
		"AERFS_NETWORK=proxy "+n.proxy+": the only way out of this session (docs/confinement.md)")
}

// lastWins keeps the last entry of each variable in env: what aerfs run
// sets replaces what the caller had.
func lastWins(env []string) []string {
	idx := map[string]int{}
	var out []string
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := idx[k]; ok {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out
}

// netSummary is a connection in a log or watch line: "example.org:443 web
// sent 517 B received 1.2 MiB in 340ms".
func netSummary(n *evidence.NetConn) string {
	d := time.Duration(n.DurationUS) * time.Microsecond
	return fmt.Sprintf("%s %s sent %s received %s in %s", net.JoinHostPort(showName(n.Host), strconv.Itoa(n.Port)), showName(n.Channel),
		humanSize(n.Sent), humanSize(n.Received), d.Round(time.Millisecond))
}

// printSessionNet prints a session's network and the hosts it reached,
// for aerfs status.
func printSessionNet(out io.Writer, s daemon.SessionStatus) {
	if s.Network == "" {
		return
	}
	fmt.Fprintf(out, "  %-20s network:  %s\n", "", showName(s.Network))
	const show = 8
	for i, h := range s.Hosts {
		if i == show {
			fmt.Fprintf(out, "  %-20s           … and %d more hosts (aerfs log --type net --session %s)\n", "", len(s.Hosts)-show, s.ID)
			break
		}
		what := fmt.Sprintf("%d connections", h.Conns)
		if h.Refused > 0 {
			what += fmt.Sprintf(", %d refused (%s)", h.Refused, showName(h.Rule))
		}
		if h.Failed > 0 {
			what += fmt.Sprintf(", %d not reached", h.Failed)
		}
		fmt.Fprintf(out, "  %-20s           %s %s: %s, sent %s, received %s\n", "", net.JoinHostPort(showName(h.Host), strconv.Itoa(h.Port)),
			showName(h.Channel), what, humanSize(h.Sent), humanSize(h.Received))
	}
}
