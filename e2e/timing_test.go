//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	fm "github.com/aerfs/aerfs/e2e/fakemodel"
)

// timingRuns is how many runs of each kind (aerfs, plain) the timing takes,
// interleaved; AERFS_E2E_RUNS overrides.
func timingRuns() int {
	n := 5
	if s := os.Getenv("AERFS_E2E_RUNS"); s != "" {
		fmt.Sscan(s, &n)
	}
	if n < 1 {
		n = 1
	}
	return n
}

type timing struct {
	client      string
	aerfs, bare []time.Duration // per turn, one per run
	turns       int
	note        string
}

var (
	timingsMu sync.Mutex
	timings   []timing
)

// TestTurnTiming measures the wall time per model turn of each client on an
// aerfs mount and on a plain directory, runs interleaved. It reports, it
// does not assert a bound.
func TestTurnTiming(t *testing.T) {
	for _, c := range clients {
		c := c
		t.Run(c.name, func(t *testing.T) {
			c.require(t)
			steps := func() []fm.Step {
				return []fm.Step{
					{Kind: fm.Write, Path: "src/a.txt", Content: "alpha\n"},
					{Kind: fm.Read, Path: "src/a.txt"},
					{Kind: fm.Edit, Path: "src/a.txt", Old: "alpha\n", New: "beta\n"},
					{Kind: fm.Shell, Command: "ls src && cat src/a.txt"},
					{Kind: fm.Final, Text: "TIMING-DONE"},
				}
			}
			tm := timing{client: c.name}
			for i := 0; i < timingRuns(); i++ {
				e := newEnv(t, map[string]string{"README.md": "# timing\n"}, nil)
				r := runClient(t, c, e.WS, "USER", fmt.Sprintf("timing%d", i), "Write, read and edit a file.", steps())
				if r.code != 0 || r.turns == 0 {
					tm.note = fmt.Sprintf("aerfs run %d: exit %d, %d turns", i, r.code, r.turns)
				} else {
					tm.aerfs = append(tm.aerfs, r.dur/time.Duration(r.turns))
					tm.turns = r.turns
				}
				if d := denials(e.log()); len(d) > 0 {
					tm.note = fmt.Sprintf("aerfs run %d had %d refusals %v", i, len(d), rulesOf(d))
				}
				e.unmount()
				bare := t.TempDir()
				os.WriteFile(bare+"/README.md", []byte("# timing\n"), 0o644)
				r = runClient(t, c, bare, "", "", "Write, read and edit a file.", steps())
				if r.code != 0 || r.turns == 0 {
					tm.note = fmt.Sprintf("plain run %d: exit %d, %d turns", i, r.code, r.turns)
				} else {
					tm.bare = append(tm.bare, r.dur/time.Duration(r.turns))
				}
			}
			timingsMu.Lock()
			timings = append(timings, tm)
			timingsMu.Unlock()
		})
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func printTimings() {
	timingsMu.Lock()
	defer timingsMu.Unlock()
	if len(timings) == 0 {
		return
	}
	fmt.Println("\n== wall time per model turn (median, runs interleaved)")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CLIENT\tTURNS/RUN\tRUNS (aerfs/plain)\tAERFS\tPLAIN\tRATIO\tNOTE")
	for _, tm := range timings {
		a, b := median(tm.aerfs), median(tm.bare)
		ratio := "-"
		if a > 0 && b > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(a)/float64(b))
		}
		fmt.Fprintf(w, "%s\t%d\t%d/%d\t%v\t%v\t%s\t%s\n", tm.client, tm.turns, len(tm.aerfs), len(tm.bare),
			a.Round(time.Millisecond), b.Round(time.Millisecond), ratio, tm.note)
	}
	w.Flush()
}
