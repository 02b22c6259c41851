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
