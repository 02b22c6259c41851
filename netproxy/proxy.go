package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Target is what a session asked to reach.
type Target struct {
	Host string // lowercase name or normal-form address (policy.NormalHost)
	Port int
	Op   string // "connect", "http" or "forward"
}

// Addr is host:port, with brackets around an IPv6 address.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// Decision is the session's answer for a Target.
type Decision struct {
	Allow   bool
	Channel string // model, trusted, web or deny
	Rule    string // the rule id, for the refusal and the record
	Reason  string // the rule's reason, in words
	Hint    string // for a refusal: how the owner lets it through, if at all
	Why     string // what classed the host (for the record)
	// Taints: what the host sends taints the session; Session.Taint is
	// called before its first byte reaches the session.
	Taints bool
}

// Conn is one connection the session asked for, allowed or not, as
// Session.Done receives it.
type Conn struct {
	Target   Target
	Decision Decision
	Start    time.Time // when it was decided
	End      time.Time
	// Sent and Received count the bytes between the proxy and the host
	// (requests and responses with their headers, or the tunnel's bytes).
	Sent, Received int64
	// Err says why an allowed connection could not be made, or how it
	// broke ("" for an ordinary end).
	Err string
}

// Session is what the proxy asks about the session its listeners belong to.
// Its methods are called from many goroutines at once.
type Session interface {
	// Decide decides a connection before anything is dialled.
	Decide(Target) Decision
	// DecideAddr decides an allowed connection again with each address
	// the host resolved to, just before that address is dialled: a name
	// may resolve to an address the host itself answers on. It returns d
	// to let the dial go on, or a refusal.
	DecideAddr(t Target, d Decision, addr netip.Addr) Decision
	// Taint is called, for a Decision that Taints, before the first byte
	// the host sent is relayed; the proxy waits for it to return.
	Taint(Target)
	// Done receives every connection once, when it ends or is refused.
	Done(*Conn)
}

// Options tune a Proxy; the zero value is usable.
type Options struct {
	// DialTimeout bounds one connection to a host (default 30 s). The
	// proxy dials from the daemon's network namespace, each address
	// decided by Session.DecideAddr before the connection is attempted.
	DialTimeout time.Duration
	// MaxConns bounds the connections served at once per listener
	// (default 1024); further ones wait in the listener's backlog.
	MaxConns int
	// IdleTimeout closes a client connection that sends no request for
	// this long between requests (default 2 minutes). Tunnels have none.
	IdleTimeout time.Duration
}

// Proxy serves the listeners of one session.
type Proxy struct {
	s      Session
	o      Options
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[io.Closer]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New makes a proxy for one session.
func New(s Session, o Options) *Proxy {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 30 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 1024
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{s: s, o: o, ctx: ctx, cancel: cancel, lns: map[net.Listener]struct{}{}, conns: map[io.Closer]struct{}{}}
}

// Serve accepts proxy clients on ln until Close, then returns nil.
func (p *Proxy) Serve(ln net.Listener) error {
	return p.accept(ln, p.serveClient)
}

// ServeForward relays every connection accepted on ln to t (its Op is
// set to "forward") until Close.
func (p *Proxy) ServeForward(ln net.Listener, t Target) error {
	t.Op = "forward"
	return p.accept(ln, func(c net.Conn) { p.forward(c, t) })
}

func (p *Proxy) accept(ln net.Listener, serve func(net.Conn)) error {
	if !p.track(ln, true) {
		ln.Close()
		return nil
	}
	defer p.track(ln, false)
	sem := make(chan struct{}, p.o.MaxConns)
	backoff := 5 * time.Millisecond
	for {
		sem <- struct{}{}
		c, err := ln.Accept()
		if err != nil {
			<-sem
			if p.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors or memory: wait, and serve on.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !p.track(c, true) {
			c.Close()
			<-sem
			return nil
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { <-sem }()
			defer p.untrack(c)
			serve(c)
		}()
	}
}

// Close stops every listener and connection of the proxy and waits for
// their Done calls.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for l := range p.lns {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track adds (or removes) a listener or connection to what Close closes;
// it reports false once the proxy is closed.
func (p *Proxy) track(x io.Closer, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		if l, ok := x.(net.Listener); ok {
			delete(p.lns, l)
		}
		delete(p.conns, x)
		return true
	}
	if p.closed {
		return false
	}
	if l, ok := x.(net.Listener); ok {
		p.lns[l] = struct{}{}
	} else {
		p.conns[x] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(c io.Closer) {
	c.Close()
	p.track(c, false)
}

// connect decides t and, when allowed, dials it. It returns the record
// of the connection (to be ended with finish) and the upstream connection,
// or nil and a reason the caller answers with.
func (p *Proxy) connect(t Target) (*Conn, net.Conn) {
	d := p.s.Decide(t)
	cr := &Conn{Target: t, Decision: d, Start: time.Now()}
	if !d.Allow {
		return cr, nil
	}
	// The address is decided in the dialler's control hook, after the
	// name is resolved and before the connection is attempted: a name
	// that resolves to the host's loopback is refused without a packet
	// reaching it, and nothing tells the session whether a port is open.
	var refusal *Decision
	var mu sync.Mutex
	dialer := &net.Dialer{Timeout: p.o.DialTimeout, KeepAlive: 30 * time.Second,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("unexpected address %q", address)
			}
			if nd := p.s.DecideAddr(t, d, ap.Addr().Unmap()); !nd.Allow {
				mu.Lock()
				refusal = &nd
				mu.Unlock()
				return errRefusedAddr
			}
			return nil
		}}
	ctx, cancel := context.WithTimeout(p.ctx, p.o.DialTimeout)
	up, err := dialer.DialContext(ctx, "tcp", t.Addr())
	cancel()
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		if refusal != nil {
			cr.Decision = *refusal
			return cr, nil
		}
		cr.Err = "cannot reach " + t.Addr() + ": " + dialError(err)
		return cr, nil
	}
	if !p.track(up, true) {
		up.Close()
		cr.Err = "the proxy is closing"
		return cr, nil
	}
	return cr, up
}

func (p *Proxy) finish(cr *Conn, up net.Conn) {
	if up != nil {
		p.untrack(up)
	}
	cr.End = time.Now()
	p.s.Done(cr)
}

// errRefusedAddr fails a dial whose address Session.DecideAddr refused.
var errRefusedAddr = errors.New("address refused")

// dialError is err without the dialler's own prefixes.
func dialError(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	return err.Error()
}

// forward relays c to t as it is.
func (p *Proxy) forward(c net.Conn, t Target) {
	cr, up := p.connect(t)
	defer func() { p.finish(cr, up) }()
	if up == nil {
		return // nothing can be said on a raw connection: it closes
	}
	p.relay(c, up, nil, cr)
}

// serveClient reads proxy requests from c until it closes, a tunnel takes
// it over, or a response cannot be followed by another.
func (p *Proxy) serveClient(c net.Conn) {
	br := bufio.NewReaderSize(c, 16<<10)
	for {
		c.SetReadDeadline(time.Now().Add(p.o.IdleTimeout))
		req, err := readRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isTimeout(err) && !errors.Is(err, net.ErrClosed) {
				answer(c, 400, "Bad Request", "", badRequest("the request cannot be read: "+err.Error()))
			}
			return
		}
		c.SetReadDeadline(time.Time{})
		if req.Method == "CONNECT" {
			p.tunnel(c, br, req)
			return
		}
		if !p.plain(c, br, req) {
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// badRequest is the body of a 400 answer.
func badRequest(what string) string {
	return "aerfs: " + what + "\nhint: this is the session's proxy (HTTP_PROXY): send CONNECT host:port, or a request with an absolute http:// URL\n"
}

// answer writes a complete response that closes the connection.
func answer(w io.Writer, code int, status, rule, body string) {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n", code, status)
	if rule != "" {
		fmt.Fprintf(&b, "X-Aerfs-Rule: %s\r\n", rule)
	}
	fmt.Fprintf(&b, "Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	io.WriteString(w, b.String())
}

// refuse answers a refused connection: the rule in the status line (which
// clients print: "HTTP Error 403: Refused by aerfs (RN-secret)"), in a
// header and in the body.
func refuse(w io.Writer, cr *Conn) {
	d := cr.Decision
	if d.Allow {
		answer(w, 502, "Bad Gateway", "", "aerfs: "+cr.Err+"\n")
		return
	}
	body := fmt.Sprintf("aerfs: connection to %s refused (rule %s): %s\n", cr.Target.Addr(), d.Rule, d.Reason)
	if d.Hint != "" {
		body += "hint: " + d.Hint + "\n"
	}
	answer(w, 403, "Refused by aerfs ("+d.Rule+")", d.Rule, body)
}

// tunnel serves a CONNECT request.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, req *request) {
	t, problem := req.target()
	if problem != "" {
		answer(c, 400, "Bad Request", "", badRequest(problem))
		return
	}
	t.Op = "connect"
	cr, up := p.connect(t)
	defer func() { p.finish(cr, up) }()
	if up == nil {
		refuse(c, cr)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		cr.Err = "the session closed the connection"
		return
	}
	p.relay(c, up, br, cr)
}

// relay copies both ways until both sides have finished, counting the
// bytes into cr. pending holds bytes the client sent after its request
// head. The first byte from up is relayed only after Session.Taint when
// the decision taints.
func (p *Proxy) relay(c, up net.Conn, pending *bufio.Reader, cr *Conn) {
	var sent, received atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		if pending != nil {
			if n := pending.Buffered(); n > 0 {
				b, _ := pending.Peek(n)
				w, err := up.Write(b)
				sent.Add(int64(w))
				pending.Discard(n)
				if err != nil {
					closeWrite(up)
					return
				}
			}
		}
		// Plain TCP on both sides: the kernel splices.
		n, _ := io.Copy(up, c)
		sent.Add(n)
		closeWrite(up)
	}()
	first := make([]byte, 32<<10)
	n, err := up.Read(first)
	if n > 0 {
		if cr.Decision.Taints {
			p.s.Taint(cr.Target)
		}
		w, werr := c.Write(first[:n])
		received.Add(int64(w))
		if werr == nil {
			m, _ := io.Copy(c, up)
			received.Add(m)
		}
	} else if err != nil && !errors.Is(err, io.EOF) {
		cr.Err = "the host: " + dialError(err)
	}
	closeWrite(c)
	<-done
	cr.Sent, cr.Received = sent.Load(), received.Load()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
