package netproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/aerfs/aerfs/policy"
)

// request is one request a proxy client sent.
type request struct{ *http.Request }

func readRequest(br *bufio.Reader) (*request, error) {
	r, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	return &request{r}, nil
}

// target is the host and port a request asks for, or what is wrong with
// it.
func (r *request) target() (Target, string) {
	var host, port string
	if r.Method == "CONNECT" {
		h, p, err := net.SplitHostPort(r.URL.Host)
		if err != nil || r.URL.Path != "" {
			return Target{}, "CONNECT needs host:port, got " + strconv.Quote(r.RequestURI)
		}
		host, port = h, p
	} else {
		switch {
		case !r.URL.IsAbs():
			return Target{}, "a request for " + strconv.Quote(r.RequestURI) + " without a host: this is the session's proxy, not a web server"
		case r.URL.Scheme == "https":
			return Target{}, "https:// URLs go through CONNECT host:443 (the client does the TLS)"
		case r.URL.Scheme != "http":
			return Target{}, "the proxy forwards http:// requests and CONNECT tunnels, not " + strconv.Quote(r.URL.Scheme)
		}
		host, port = r.URL.Hostname(), r.URL.Port()
		if port == "" {
			port = "80"
		}
	}
	h, ok := policy.NormalHost(host)
	if !ok {
		return Target{}, "the host " + strconv.Quote(host) + " is neither a host name nor an address"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return Target{}, "the port " + strconv.Quote(port) + " is not a number from 1 to 65535"
	}
	return Target{Host: h, Port: n}, ""
}

// hopByHop are the headers of one connection, which a proxy does not
// forward (RFC 9110 §7.6.1), and the proxy's own.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Upgrade"}

// dropHopByHop removes them, and the headers the Connection header names;
// an upgrade (a WebSocket handshake) keeps Connection and Upgrade.
func dropHopByHop(h http.Header, upgrade bool) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !(upgrade && strings.EqualFold(name, "upgrade")) {
				h.Del(name)
			}
		}
	}
	for _, k := range hopByHop {
		if upgrade && (k == "Connection" || k == "Upgrade") {
			continue
		}
		h.Del(k)
	}
}

func isUpgrade(h http.Header) bool {
	if h.Get("Upgrade") == "" {
		return false
	}
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(name), "upgrade") {
				return true
			}
		}
	}
	return false
}

// plain forwards one request with an absolute http:// URL over a new
// upstream connection and relays the response as it arrives. It reports
// whether the client connection can carry another request.
func (p *Proxy) plain(c net.Conn, br *bufio.Reader, req *request) bool {
	t, problem := req.target()
	if problem != "" {
		answer(c, 400, "Bad Request", "", badRequest(problem))
		return false
	}
	t.Op = "http"
	cr, up := p.connect(t)
	defer func() { p.finish(cr, up) }()
	if up == nil {
		refuse(c, cr)
		return false
	}
	cu := &countConn{Conn: up}
	if cr.Decision.Taints {
		cu.first = func() { p.s.Taint(t) }
	}
	defer func() { cr.Sent, cr.Received = cu.sent, cu.received }()

	r := req.Request
	clientClose := r.Close
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// Answer it here: the host gets the body with the request.
		r.Header.Del("Expect")
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	upgrade := isUpgrade(r.Header)
	dropHopByHop(r.Header, upgrade)
	if _, ok := r.Header["User-Agent"]; !ok {
		r.Header["User-Agent"] = []string{""} // Write adds Go's own otherwise
	}
	r.Close = !upgrade // one request per upstream connection
	if err := r.Write(cu); err != nil {
		cr.Err = "sending the request: " + dialError(err)
		answer(c, 502, "Bad Gateway", "", "aerfs: "+t.Addr()+": "+cr.Err+"\n")
		return false
	}
	ubr := bufio.NewReaderSize(cu, 16<<10)
	var resp *http.Response
	for {
		var err error
		resp, err = http.ReadResponse(ubr, r)
		if err != nil {
			cr.Err = "no valid response: " + dialError(err)
			answer(c, 502, "Bad Gateway", "", "aerfs: "+t.Addr()+": "+cr.Err+"\n")
			return false
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		resp.Write(c) // 103 Early Hints and the like
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols && upgrade {
		// The head as it came, then both ways as a tunnel.
		if err := resp.Write(c); err != nil {
			return false
		}
		p.relayCounted(c, br, cu, ubr, cr)
		return false
	}
	keep := !clientClose && (resp.ContentLength >= 0 || chunked(resp.TransferEncoding) || !bodyAllowed(r.Method, resp.StatusCode))
	dropHopByHop(resp.Header, false)
	resp.Close = !keep
	if err := resp.Write(c); err != nil {
		if cr.Err == "" {
			cr.Err = "relaying the response: " + dialError(err)
		}
		return false
	}
	return keep
}

// relayCounted is relay for an upgraded connection: bytes already read on
// either side go first, and the counting connection keeps counting.
func (p *Proxy) relayCounted(c net.Conn, cbr *bufio.Reader, up *countConn, ubr *bufio.Reader, cr *Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, cbr)
		closeWrite(up.Conn)
	}()
	io.Copy(c, ubr)
	closeWrite(c)
	<-done
}

func chunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

func bodyAllowed(method string, status int) bool {
	return method != "HEAD" && status != 204 && status != 304 && (status < 100 || status >= 200)
}

// countConn counts the bytes of an upstream connection and calls first
// before its first received byte is returned.
type countConn struct {
	net.Conn
	sent, received int64
	first          func()
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		if c.first != nil {
			c.first()
			c.first = nil
		}
		c.received += int64(n)
	}
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent += int64(n)
	return n, err
}
