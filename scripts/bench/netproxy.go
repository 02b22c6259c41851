package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The proxy rows (docs/confinement.md, "The network"): what a session's
// proxy costs against a direct connection measured in the same run. A
// server in the bench process on 127.0.0.1 serves 100 MiB and one byte;
// the same worker downloads them directly (the native column) and, started
// with aerfs run in a confined session, through its proxy (the aerfs
// column). The host is web to the session: the taint step is included.
var netRows = []rowDef{
	{"proxy-tunnel", "100 MiB download, CONNECT tunnel", "MiB/s", true, "-", "native column: a direct TCP connection to a server on 127.0.0.1; aerfs column: the same through a confined session's proxy (CONNECT). Median of 3 downloads per run"},
	{"proxy-plain", "100 MiB download, plain http://", "MiB/s", true, "-", "aerfs column: an absolute-URL GET the proxy forwards; native: direct"},
	{"proxy-paced", "100 MiB from a 200 MiB/s server, tunnel", "MiB/s", true, "-", "the server sends at most 200 MiB/s (a fast network link, not loopback memory bandwidth): what a session sees when the network, not the CPU, is the limit"},
	{"proxy-conn", "new connection + 1-byte GET", "ms", false, "-", "mean over sequential connections; aerfs column: through the proxy (CONNECT, then the GET), native: direct"},
	{"proxy-conn-added", "added per connection by the proxy", "ms", false, "-", "aerfs column: proxy-conn aerfs − native, same run"},
}

func init() { rowDefs = append(rowDefs, netRows...) }

const netBig = 100 << 20

// netServer serves /big (100 MiB) and /one (1 byte) on 127.0.0.1.
func netServer() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/one" {
			w.Header().Set("Content-Length", "1")
			w.Write([]byte{'x'})
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(netBig))
		start := time.Now()
		for n := 0; n < netBig; n += len(chunk) {
			if r.URL.Path == "/paced" {
				// 200 MiB/s: chunk n is due at n/200 MiB seconds.
				time.Sleep(time.Until(start.Add(time.Duration(float64(n) / (200 << 20) * float64(time.Second)))))
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

type netResult struct {
	Paced  float64 `json:"paced_mibs"`
	Tunnel float64 `json:"tunnel_mibs"`
	Plain  float64 `json:"plain_mibs"`
	ConnMS float64 `json:"conn_ms"`
}

func (b *bench) wlNet(t *target, rep int) error {
	if t.Name != tAerfs {
		return nil
	}
	base, stop, err := netServer()
	if err != nil {
		return err
	}
	defer stop()
	n := map[bool]string{true: "50", false: "300"}[b.quick]
	out, _, err := b.run(b.aerfsWS, b.self, workerArg, "net", base, n)
	if err != nil {
		return fmt.Errorf("direct: %w: %s", err, out)
	}
	var direct netResult
	if err := json.Unmarshal(out, &direct); err != nil {
		return fmt.Errorf("direct: %v: %s", err, out)
	}
	out, _, err = b.run(b.aerfsWS, b.aerfsBin, "run", "--workspace", b.aerfsWS, "--principal", "USER", "--", b.self, workerArg, "net", base, n)
	if err != nil {
		return fmt.Errorf("through the proxy: %w: %s", err, out)
	}
	var proxied netResult
	if err := json.Unmarshal(out, &proxied); err != nil {
		return fmt.Errorf("through the proxy: %v: %s", err, out)
	}
	b.res.add("proxy-tunnel", tNative, direct.Tunnel)
	b.res.add("proxy-tunnel", tAerfs, proxied.Tunnel)
	b.res.add("proxy-paced", tNative, direct.Paced)
	b.res.add("proxy-paced", tAerfs, proxied.Paced)
	b.res.add("proxy-plain", tNative, direct.Plain)
	b.res.add("proxy-plain", tAerfs, proxied.Plain)
	b.res.add("proxy-conn", tNative, direct.ConnMS)
	b.res.add("proxy-conn", tAerfs, proxied.ConnMS)
	b.res.add("proxy-conn-added", tAerfs, proxied.ConnMS-direct.ConnMS)
	return nil
}

// workerNet downloads from base directly or, when HTTP_PROXY is set (a
// confined session), through the proxy: /big three times by each path,
// then n sequential new connections fetching /one.
func workerNet(base string, n int) (*netResult, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	proxy := ""
	if p := os.Getenv("HTTP_PROXY"); p != "" {
		pu, err := url.Parse(p)
		if err != nil {
			return nil, err
		}
		proxy = pu.Host
	}
	// get opens a connection and fetches path: directly, through a
	// CONNECT tunnel, or as a plain proxied request.
	get := func(path string, tunnel bool) (int64, error) {
		addr, target := u.Host, path
		if proxy != "" {
			addr = proxy
			if !tunnel {
				target = base + path
			}
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 64<<10)
		if proxy != "" && tunnel {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host, u.Host)
			resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
			if err != nil || resp.StatusCode != 200 {
				return 0, fmt.Errorf("CONNECT: %v %v", resp, err)
			}
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, u.Host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %s", target, resp.Status)
		}
		return io.Copy(io.Discard, resp.Body)
	}
	mibs := func(path string, tunnel bool) (float64, error) {
		var v []float64
		for i := 0; i < 3; i++ {
			t := time.Now()
			got, err := get(path, tunnel)
			if err != nil {
				return 0, err
			}
			if got != netBig {
				return 0, fmt.Errorf("got %d bytes", got)
			}
			v = append(v, float64(netBig)/(1<<20)/time.Since(t).Seconds())
		}
		sort.Float64s(v)
		return v[1], nil
	}
	r := &netResult{}
	if r.Tunnel, err = mibs("/big", true); err != nil {
		return nil, err
	}
	if r.Plain, err = mibs("/big", false); err != nil {
		return nil, err
	}
	if r.Paced, err = mibs("/paced", true); err != nil {
		return nil, err
	}
	get("/one", true) // warm up
	t := time.Now()
	for i := 0; i < n; i++ {
		if _, err := get("/one", true); err != nil {
			return nil, err
		}
	}
	r.ConnMS = float64(time.Since(t).Microseconds()) / 1000 / float64(n)
	if proxy == "" && strings.Contains(base, "://") {
		// Direct: the tunnel and plain paths are the same connection.
		r.Plain = max(r.Plain, r.Tunnel)
	}
	return r, nil
}
