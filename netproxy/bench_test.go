package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkTunnel is a 100 MiB download through a CONNECT tunnel of the
// proxy against the same download directly, on loopback (b.SetBytes: the
// MB/s column). make bench measures the same between a confined session
// and a direct client.
func BenchmarkTunnel(b *testing.B) {
	const size = 100 << 20
	srv, _ := net.Listen("tcp", "127.0.0.1:0")
	defer srv.Close()
	chunk := make([]byte, 1<<20)
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for n := 0; n < size; n += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	s := newSession(true)
	go func() {
		for range s.doneCh {
		}
	}()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	p := New(s, Options{})
	go p.Serve(ln)
	defer p.Close()
	for _, via := range []string{"direct", "tunnel"} {
		b.Run(via, func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				var c net.Conn
				var err error
				var r io.Reader
				if via == "direct" {
					c, err = net.Dial("tcp", srv.Addr().String())
					r = c
				} else {
					c, err = net.Dial("tcp", ln.Addr().String())
					fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", srv.Addr())
					br := bufio.NewReader(c)
					resp, _ := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
					if resp == nil || resp.StatusCode != 200 {
						b.Fatal("CONNECT")
					}
					r = io.MultiReader(io.LimitReader(br, int64(br.Buffered())), c)
				}
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, r)
				c.Close()
				if n != size {
					b.Fatalf("%d bytes", n)
				}
			}
		})
	}
}
