package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The confinement rows (docs/confinement.md): what `aerfs run` adds to start
// a session confined (user and mount namespaces, Landlock, seccomp) and
// with --sandbox=off, and a build in a confined session against the same
// build in an unconfined one. They fill the aerfs column only.
var confineRows = []rowDef{
	{"run-start-confined", "aerfs run -- true, confined", "ms", false, "-", "aerfs column: start, register, confine and end a session (median of the samples); other columns: none"},
	{"run-start-off", "aerfs run -- true, --sandbox=off", "ms", false, "-", "aerfs column: the same unconfined"},
	{"build-confined", "C build, confined ÷ unconfined", "ratio", false, "warm", "aerfs column: time of cc -c of a generated file set in a confined USER session divided by the same with --sandbox=off"},
	{"connect-tcp-confined", "connect() to 127.0.0.1, confined", "µs", false, "-", "aerfs column: one TCP connect (and close) in a confined session, where the daemon carries out every connect() (daemon/sockets.go); mean of 2000"},
	{"connect-tcp-off", "connect() to 127.0.0.1, --sandbox=off", "µs", false, "-", "aerfs column: the same unconfined"},
	{"connect-unix-confined", "connect() to its own Unix socket, confined", "µs", false, "-", "aerfs column: one connect to a path socket in the session's own /tmp, resolved and decided by the daemon; mean of 2000"},
	{"connect-unix-off", "connect() to its own Unix socket, --sandbox=off", "µs", false, "-", "aerfs column: the same unconfined"},
}

func init() { rowDefs = append(rowDefs, confineRows...) }

// confineStarts is how many sessions each start row times per run.
const confineStarts = 10

func (b *bench) wlConfine(t *target, rep int) error {
	if t.Name != tAerfs {
		return nil
	}
	start := func(flags ...string) (float64, error) {
		var ms []float64
		for i := 0; i < confineStarts; i++ {
			a := append([]string{"run", "--workspace", b.aerfsWS, "--principal", "USER"}, flags...)
			_, d, err := b.run(b.aerfsWS, b.aerfsBin, append(a, "--", "true")...)
			if err != nil {
				return 0, err
			}
			ms = append(ms, float64(d.Microseconds())/1000)
		}
		return newStat(ms).Median, nil
	}
	on, err := start()
	if err != nil {
		return err
	}
	off, err := start("--sandbox=off")
	if err != nil {
		return err
	}
	b.res.add("run-start-confined", t.Name, on)
	b.res.add("run-start-off", t.Name, off)

	dir := filepath.Join(t.Dir, fmt.Sprintf("cbuild-%d", rep))
	if err := writeCSet(dir, map[bool]int{true: 12, false: 40}[b.quick]); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	build := func(flags ...string) (time.Duration, error) {
		a := append([]string{"run", "--workspace", b.aerfsWS, "--principal", "USER"}, flags...)
		a = append(a, "--", "sh", "-c", "rm -f *.o && for f in *.c; do cc -O2 -c \"$f\" || exit 1; done")
		_, d, err := b.run(dir, b.aerfsBin, a...)
		return d, err
	}
	// Warm the page cache and the compiler once, then alternate.
	if _, err := build("--sandbox=off"); err != nil {
		return err
	}
	var con, unc time.Duration
	for i := 0; i < 2; i++ {
		d1, err := build()
		if err != nil {
			return err
		}
		d2, err := build("--sandbox=off")
		if err != nil {
			return err
		}
		con, unc = con+d1, unc+d2
	}
	b.res.add("build-confined", t.Name, float64(con)/float64(unc))
	return b.confineConnect(t)
}

// connectLoop times connect() from a session: TCP to a listener on
// 127.0.0.1 and Unix to a socket in /tmp, both its own, 2000 each.
const connectLoop = `
import socket, tempfile, threading, time
def drain(s):
    while True:
        c, _ = s.accept(); c.close()
def timed(family, addr):
    s = socket.socket(family); s.bind(addr); s.listen(4096)
    threading.Thread(target=drain, args=(s,), daemon=True).start()
    a = s.getsockname(); n = 2000
    t = time.perf_counter()
    for i in range(n):
        c = socket.socket(family); c.connect(a); c.close()
    return (time.perf_counter() - t) / n * 1e6
print("tcp", timed(socket.AF_INET, ("127.0.0.1", 0)))
print("unix", timed(socket.AF_UNIX, tempfile.mktemp(dir="/tmp")))
`

func (b *bench) confineConnect(t *target) error {
	measure := func(flags ...string) (tcp, unix float64, err error) {
		a := append([]string{"run", "--workspace", b.aerfsWS, "--principal", "USER"}, flags...)
		b0, _, err := b.run(b.aerfsWS, b.aerfsBin, append(a, "--", "python3", "-c", connectLoop)...)
		out := string(b0)
		if err != nil {
			return 0, 0, err
		}
		for _, line := range strings.Split(out, "\n") {
			var v float64
			if _, err := fmt.Sscanf(line, "tcp %g", &v); err == nil {
				tcp = v
			} else if _, err := fmt.Sscanf(line, "unix %g", &v); err == nil {
				unix = v
			}
		}
		if tcp == 0 || unix == 0 {
			return 0, 0, fmt.Errorf("connect loop: %q", out)
		}
		return tcp, unix, nil
	}
	tcpOn, unixOn, err := measure()
	if err != nil {
		return err
	}
	tcpOff, unixOff, err := measure("--sandbox=off")
	if err != nil {
		return err
	}
	b.res.add("connect-tcp-confined", t.Name, tcpOn)
	b.res.add("connect-tcp-off", t.Name, tcpOff)
	b.res.add("connect-unix-confined", t.Name, unixOn)
	b.res.add("connect-unix-off", t.Name, unixOff)
	return nil
}

// writeCSet writes n C files with enough code to keep the compiler busy.
func writeCSet(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		var sb strings.Builder
		sb.WriteString("#include <stdio.h>\n#include <string.h>\n")
		for f := 0; f < 40; f++ {
			fmt.Fprintf(&sb, "int f%d_%d(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) { s += a[i] * %d; if (s > %d) s -= a[i / 2]; } return s; }\n", i, f, f+1, 1000+f)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("u%d.c", i)), []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
