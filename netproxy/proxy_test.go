package netproxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// session is a Session that allows every host but deny.example and
// records what the proxy told it.
type session struct {
	mu      sync.Mutex
	done    []*Conn
	tainted atomic.Int32
	taints  bool
	doneCh  chan *Conn
}

func newSession(taints bool) *session { return &session{taints: taints, doneCh: make(chan *Conn, 100)} }

func (s *session) Decide(t Target) Decision {
	if t.Host == "deny.example" {
		return Decision{Channel: "deny", Rule: "RN-deny", Reason: "the policy denies this host", Hint: "ask the owner"}
	}
	return Decision{Allow: true, Channel: "web", Rule: "RN-web", Taints: s.taints}
}

// DecideAddr refuses the loopback addresses the name localhost resolves
// to, as the daemon refuses the host's own addresses for a host the
// policy does not name.
func (s *session) DecideAddr(t Target, d Decision, a netip.Addr) Decision {
	if t.Host == "localhost" && a.IsLoopback() {
		return Decision{Channel: d.Channel, Rule: "RN-local", Reason: "the host's own address"}
	}
	return d
}

func (s *session) Taint(Target) { s.tainted.Add(1) }

func (s *session) Done(c *Conn) {
	s.mu.Lock()
	s.done = append(s.done, c)
	s.mu.Unlock()
	s.doneCh <- c
}

func (s *session) next(t *testing.T) *Conn {
	t.Helper()
	select {
	case c := <-s.doneCh:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no Done")
		return nil
	}
}

// start serves a proxy for s on a loopback listener.
func start(t *testing.T, s Session) (*Proxy, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := New(s, Options{})
	go p.Serve(ln)
	t.Cleanup(func() { p.Close() })
	return p, ln.Addr().String()
}

func client(proxy string) *http.Client {
	u, _ := url.Parse("http://" + proxy)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// The first byte a web host sends reaches the client only after Taint.
func TestPlainHTTPTaintsFirst(t *testing.T) {
	s := newSession(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Connection") != "" || r.Header.Get("Proxy-Authorization") != "" {
			t.Errorf("hop-by-hop header forwarded: %v", r.Header)
		}
		fmt.Fprintf(w, "page %s %s", r.URL.Path, r.Header.Get("User-Agent"))
	}))
	defer srv.Close()
	_, proxy := start(t, s)
	c := client(proxy)
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest("GET", srv.URL+"/p", nil)
		req.Header.Set("Proxy-Authorization", "Basic x")
		req.Header.Set("User-Agent", "ua")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if s.tainted.Load() == 0 {
			t.Fatal("the response arrived before the session was tainted")
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "page /p ua" {
			t.Fatalf("body %q", b)
		}
		cr := s.next(t)
		if cr.Target.Op != "http" || cr.Target.Host != "127.0.0.1" || !cr.Decision.Allow || cr.Sent == 0 || cr.Received == 0 || cr.Err != "" {
			t.Fatalf("record %+v", cr)
		}
	}
}

func TestConnectTunnelTLS(t *testing.T) {
	s := newSession(true)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure")
	}))
	defer srv.Close()
	_, proxy := start(t, s)
	c := client(proxy)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secure" || s.tainted.Load() == 0 {
		t.Fatalf("body %q, tainted %d", b, s.tainted.Load())
	}
	c.CloseIdleConnections()
	cr := s.next(t)
	if cr.Target.Op != "connect" || cr.Sent < 100 || cr.Received < 100 {
		t.Fatalf("record %+v", cr)
	}
}

// A refused host answers 403 with the rule, and nothing is dialled.
func TestRefusal(t *testing.T) {
	s := newSession(true)
	_, proxy := start(t, s)
	for _, target := range []string{"http://deny.example/x", "https://deny.example/x"} {
		resp, err := client(proxy).Get(target)
		if strings.HasPrefix(target, "https") {
			// CONNECT refused: the client reports the status.
			if err == nil || !strings.Contains(err.Error(), "Refused by aerfs (RN-deny)") {
				t.Fatalf("CONNECT: %v", err)
			}
		} else {
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 403 || resp.Status != "403 Refused by aerfs (RN-deny)" || resp.Header.Get("X-Aerfs-Rule") != "RN-deny" ||
				!strings.Contains(string(b), "aerfs: connection to deny.example:80 refused (rule RN-deny): the policy denies this host\nhint: ask the owner") {
				t.Fatalf("%s %v %q", resp.Status, resp.Header, b)
			}
		}
		cr := s.next(t)
		if cr.Decision.Allow || cr.Sent != 0 || cr.Received != 0 {
			t.Fatalf("record %+v", cr)
		}
	}
	if s.tainted.Load() != 0 {
		t.Fatal("a refusal tainted the session")
	}
}

func rawRequest(t *testing.T, proxy, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, req)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestBadRequests(t *testing.T) {
	s := newSession(true)
	_, proxy := start(t, s)
	for req, want := range map[string]string{
		"GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n":                "without a host: this is the session's proxy, not a web server",
		"GET https://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n":       "https:// URLs go through CONNECT",
		"CONNECT example.org HTTP/1.1\r\nHost: example.org\r\n\r\n":            "CONNECT needs host:port",
		"CONNECT exa_mple..org:443 HTTP/1.1\r\nHost: x\r\n\r\n":                "is neither a host name nor an address",
		"CONNECT 2130706433:80 HTTP/1.1\r\nHost: x\r\n\r\n":                    "is neither a host name nor an address",
		"CONNECT example.org:99999 HTTP/1.1\r\nHost: x\r\n\r\n":                "is not a number from 1 to 65535",
		"GET ftp://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n":         "not \"ftp\"",
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n": "the request cannot be read",
	} {
		got := rawRequest(t, proxy, req)
		if !strings.HasPrefix(got, "HTTP/1.1 400 Bad Request") || !strings.Contains(got, want) || !strings.Contains(got, "hint: this is the session's proxy") {
			t.Errorf("%q: %q", req, got)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.done) != 0 {
		t.Errorf("a request that names no valid host was recorded as a connection: %+v", s.done[0])
	}
}

// A streamed response reaches the client while the host is still sending.
func TestStreaming(t *testing.T) {
	s := newSession(false)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: two\n\n")
	}))
	defer srv.Close()
	defer close(release)
	_, proxy := start(t, s)
	resp, err := client(proxy).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q %v", line, err)
	}
	if s.tainted.Load() != 0 {
		t.Fatal("a host whose decision does not taint tainted the session")
	}
}

// A POST with Expect: 100-continue, a HEAD, and a host that is down.
func TestBodiesAndErrors(t *testing.T) {
	s := newSession(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Len", fmt.Sprint(len(b)))
		io.WriteString(w, strings.ToUpper(string(b)))
	}))
	defer srv.Close()
	_, proxy := start(t, s)
	c := client(proxy)
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(strings.Repeat("x", 100000)))
	req.Header.Set("Expect", "100-continue")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) != 100000 || resp.Header.Get("X-Len") != "100000" {
		t.Fatalf("POST: %d bytes, %v", len(b), resp.Header)
	}
	if cr := s.next(t); cr.Sent < 100000 {
		t.Fatalf("sent %d", cr.Sent)
	}
	resp, err = c.Head(srv.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %v %v", resp, err)
	}
	resp.Body.Close()
	s.next(t)
	// A port nobody listens on.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()
	resp, err = c.Get("http://" + dead + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), "aerfs: cannot reach "+dead) {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	if cr := s.next(t); cr.Err == "" || !cr.Decision.Allow {
		t.Fatalf("record %+v", cr)
	}
}

// A 101 upgrade is relayed both ways.
func TestUpgrade(t *testing.T) {
	s := newSession(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			t.Errorf("upgrade header lost: %v", r.Header)
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		io.WriteString(conn, "echo: "+line)
	}))
	defer srv.Close()
	_, proxy := start(t, s)
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s/ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", srv.URL, strings.TrimPrefix(srv.URL, "http://"))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("%v %v", resp, err)
	}
	io.WriteString(c, "hello\n")
	line, _ := br.ReadString('\n')
	if line != "echo: hello\n" {
		t.Fatalf("%q", line)
	}
}

func TestForward(t *testing.T) {
	s := newSession(false)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "model") }))
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	p := New(s, Options{})
	defer p.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	var n int
	fmt.Sscan(port, &n)
	go p.ServeForward(ln, Target{Host: host, Port: n})
	resp, err := http.Get("http://" + ln.Addr().String() + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if string(b) != "model" {
		t.Fatalf("%q", b)
	}
	if cr := s.next(t); cr.Target.Op != "forward" || cr.Target.Port != n || cr.Received == 0 {
		t.Fatalf("record %+v", cr)
	}
}

// Close ends live tunnels, and each still gets its Done.
func TestCloseEndsConnections(t *testing.T) {
	s := newSession(true)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hold, _ := net.Listen("tcp", "127.0.0.1:0")
	defer hold.Close()
	go func() {
		for {
			c, err := hold.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p := New(s, Options{})
	go p.Serve(ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", hold.Addr())
	br := bufio.NewReader(c)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("%q", line)
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs on a live tunnel")
	}
	s.next(t)
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("the listener accepts after Close")
	}
}

// blockingSession holds Taint until released: nothing may reach the
// client meanwhile.
type blockingSession struct {
	*session
	entered, release chan struct{}
}

func (b *blockingSession) Taint(t Target) {
	close(b.entered)
	<-b.release
	b.session.Taint(t)
}

func TestTaintBlocksRelay(t *testing.T) {
	for _, op := range []string{"connect", "http"} {
		b := &blockingSession{session: newSession(true), entered: make(chan struct{}), release: make(chan struct{})}
		srv, _ := net.Listen("tcp", "127.0.0.1:0")
		go func() {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			bufio.NewReader(c).ReadString('\n')
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
			time.Sleep(time.Second)
		}()
		_, proxy := start(t, b)
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		if op == "connect" {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", srv.Addr())
			if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 200") {
				t.Fatalf("%q", line)
			}
			br.ReadString('\n')
			io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
		} else {
			fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n", srv.Addr())
		}
		<-b.entered
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := br.ReadByte(); err == nil {
			t.Fatalf("%s: byte %q relayed while Taint had not returned", op, n)
		}
		close(b.release)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "hello" {
			t.Fatalf("%s: %q", op, body)
		}
		c.Close()
		srv.Close()
	}
}

// A host that sends nothing taints nothing.
func TestSilentHostDoesNotTaint(t *testing.T) {
	s := newSession(true)
	srv, _ := net.Listen("tcp", "127.0.0.1:0")
	defer srv.Close()
	go func() {
		c, err := srv.Accept()
		if err == nil {
			c.Close()
		}
	}()
	_, proxy := start(t, s)
	got := rawRequest(t, proxy, fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", srv.Addr()))
	if !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("%q", got)
	}
	if cr := s.next(t); cr.Received != 0 || s.tainted.Load() != 0 {
		t.Fatalf("received %d, tainted %d", cr.Received, s.tainted.Load())
	}
}

// An address DecideAddr refuses is never dialled: the host sees no
// connection, the client gets the refusal, and Done records it, for a
// CONNECT and a plain request alike.
func TestAddressRefusedBeforeDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	s := newSession(true)
	_, proxy := start(t, s)
	c := client(proxy)
	for _, u := range []string{"http://localhost:" + port + "/x", "https://localhost:" + port + "/x"} {
		resp, err := c.Get(u)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 403 || !strings.Contains(string(b), "RN-local") {
				t.Fatalf("%s: %d %q, want 403 naming RN-local", u, resp.StatusCode, b)
			}
		} else if !strings.Contains(err.Error(), "Refused by aerfs (RN-local)") {
			t.Fatalf("%s: %v, want the RN-local refusal", u, err)
		}
		cr := s.next(t)
		if cr.Decision.Allow || cr.Decision.Rule != "RN-local" || cr.Sent != 0 || cr.Received != 0 {
			t.Fatalf("%s: record %+v, want the RN-local refusal", u, cr)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the refused address was dialled %d times", n)
	}
	if s.tainted.Load() != 0 {
		t.Fatal("a refused connection tainted the session")
	}
}
