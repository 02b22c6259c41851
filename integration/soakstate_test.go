package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aerfs/aerfs/internal/procstat"
)

// TestSoakState runs AERFS_SOAK_MINUTES of mixed load against one mount —
// guarded commits, labelled plain writes, sessions started and ended all
// the time (some of them WEB, refused), reads, aerfs gc, status, session
// list and why — and fails if the daemon's memory or descriptors keep
// growing once warmed up, or if a write whose close returned success is
// missing from the log. make soak runs it for 30 minutes (SOAK_MINUTES);
// make test does not run it.
//
// Bounds, from the samples taken every 10 s. Growth is a rising level, not
// one busy moment: the level of a stretch is the median of its samples (a
// sample lands by chance on a gc, a burst of sessions starting, a status),
// taken over the last minute of the warm-up (a fifth of the run, at least
// one minute) and over every later stretch of a tenth of the run. No
// stretch's level may exceed the warm-up's by more than soakRSSGrowth
// (1.25× + 16 MiB) or soakFDGrowth (32), and no single sample may exceed
// twice the warm-up's level plus the same margin (a burst that large is a
// defect of its own).
func TestSoakState(t *testing.T) {
	minutes, _ := strconv.ParseFloat(os.Getenv("AERFS_SOAK_MINUTES"), 64)
	if minutes <= 0 {
		t.Skip("AERFS_SOAK_MINUTES is not set (make soak sets it)")
	}
	run := time.Duration(minutes * float64(time.Minute))
	warm := max(run/5, time.Minute)
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n", "memory/soak-0.md": "0\n", "memory/soak-1.md": "0\n"}).Mount()
	pid := daemonPid(t, e)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ops atomic.Int64
	loop := func(name string, every time.Duration, f func(n int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(every):
				}
				f(n)
				ops.Add(1)
			}
		}()
	}

	// Two writers commit guarded files in long-lived USER sessions and say
	// which writes were acknowledged (close returned 0).
	acked := make([][]string, 2)
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf(`
import sys, time, os
deadline = time.time() + %f
n = 0
while time.time() < deadline:
    data = "soak-%d-%%d\n" %% n
    try:
        with open("memory/soak-%d.md", "w") as f:
            f.write(data)
    except OSError as e:
        print("ERR", e, file=sys.stderr, flush=True)
        time.sleep(0.1)
        continue
    print(data, end="", flush=True)
    n += 1
    time.sleep(0.05)
`, run.Seconds(), k, k)
			r := e.Run("USER", fmt.Sprintf("soak-writer-%d", k), "python3", "-c", script)
			for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
				if l != "" {
					acked[k] = append(acked[k], l+"\n")
				}
			}
			if strings.Contains(r.Stderr, "ERR") {
				t.Errorf("writer %d: a commit failed: %s", k, r.Stderr)
			}
		}()
	}
	// Sessions come and go: the owner's agent reads and writes plain
	// files; a WEB session reads and is refused MEMORY.md.
	loop("churn", 300*time.Millisecond, func(n int) {
		if n%3 == 2 {
			e.Sh("WEB", fmt.Sprintf("soak-web-%d", n), fmt.Sprintf("cat MEMORY.md > /dev/null; echo page > notes-web-%d.html; echo x >> MEMORY.md; true", n%50))
			return
		}
		e.Sh("USER", fmt.Sprintf("soak-agent-%d", n), fmt.Sprintf("cat memory/soak-0.md > /dev/null; mkdir -p notes; echo %d > notes/n-%d.txt", n, n%200))
	})
	// A tainted session writes plain files: labelled writes, records.
	loop("plain", 500*time.Millisecond, func(n int) {
		e.Sh("WEB", fmt.Sprintf("soak-plain-%d", n), fmt.Sprintf("for i in 1 2 3 4 5; do echo %d > plain-%d-$i.txt; done", n, n%30))
	})
	loop("read", time.Second, func(n int) {
		e.Owner("cat memory/soak-1.md MEMORY.md > /dev/null; ls -l notes > /dev/null")
	})
	loop("gc", time.Minute, func(n int) {
		if r := e.Aerfs("gc", "--keep-last", "5", "--keep-within", "0s", "--workspace", e.WS); r.Code != 0 {
			t.Errorf("gc: %s", r)
		}
	})
	loop("look", 5*time.Second, func(n int) {
		e.Aerfs("status", "--workspace", e.WS)
		e.Aerfs("session", "list", "--workspace", e.WS)
		e.Aerfs("why", "MEMORY.md", "--workspace", e.WS)
	})

	type sample struct {
		At      time.Duration
		RSSKiB  int64
		FDs     int
		Records int64
	}
	var samples []sample
	take := func(at time.Duration) sample {
		s := sample{At: at.Round(time.Second), RSSKiB: procstat.RSS(pid)}
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			s.FDs = len(fds)
		}
		if fi, err := os.Stat(e.State + "/evidence/index"); err == nil {
			s.Records = fi.Size() / 40
		}
		return s
	}
	start := time.Now()
	for time.Since(start) < run {
		time.Sleep(10 * time.Second)
		s := take(time.Since(start))
		samples = append(samples, s)
		if dir := os.Getenv("AERFS_SOAK_PROFILES"); dir != "" && len(samples)%6 == 0 {
			// A heap profile a minute, for go tool pprof -base.
			e.Aerfs("debug", "pprof", "heap", "--workspace", e.WS, "-o", fmt.Sprintf("%s/heap-%03d.pprof", dir, len(samples)/6))
		}
		t.Logf("soak %6s  rss %6.1f MiB  fds %4d  records %8d  ops %d", s.At, float64(s.RSSKiB)/1024, s.FDs, s.Records, ops.Load())
	}
	close(stop)
	wg.Wait()

	level := func(ss []sample) sample {
		rss := make([]int64, len(ss))
		fds := make([]int, len(ss))
		for i, s := range ss {
			rss[i], fds[i] = s.RSSKiB, s.FDs
		}
		slices.Sort(rss)
		slices.Sort(fds)
		return sample{At: ss[len(ss)-1].At, RSSKiB: rss[len(rss)/2], FDs: fds[len(fds)/2]}
	}
	var warmSamples []sample
	var after [][]sample
	stretch := max(run/10, time.Minute)
	for _, s := range samples {
		switch {
		case s.At <= warm && s.At > warm-time.Minute:
			warmSamples = append(warmSamples, s)
		case s.At > warm:
			k := int((s.At - warm - 1) / stretch)
			for len(after) <= k {
				after = append(after, nil)
			}
			after[k] = append(after[k], s)
		}
	}
	if len(warmSamples) == 0 || len(after) == 0 {
		t.Fatalf("too few samples for a curve: %d", len(samples))
	}
	atWarm := level(warmSamples)
	var worst, peak sample
	for _, ss := range after {
		if len(ss) == 0 {
			continue
		}
		l := level(ss)
		worst.RSSKiB, worst.FDs = max(worst.RSSKiB, l.RSSKiB), max(worst.FDs, l.FDs)
		for _, s := range ss {
			peak.RSSKiB, peak.FDs = max(peak.RSSKiB, s.RSSKiB), max(peak.FDs, s.FDs)
		}
	}
	end := samples[len(samples)-1]
	curve, _ := json.Marshal(samples)
	if p := os.Getenv("AERFS_SOAK_CURVE"); p != "" {
		if err := os.WriteFile(p, curve, 0o644); err != nil {
			t.Errorf("writing the soak curve: %v", err)
		}
	}
	t.Logf("soak curve: start rss %.1f MiB fds %d; level at warm-up (%s) rss %.1f MiB fds %d; end rss %.1f MiB fds %d, %d records; highest level after warm-up rss %.1f MiB fds %d; peak sample rss %.1f MiB fds %d",
		float64(samples[0].RSSKiB)/1024, samples[0].FDs, warm, float64(atWarm.RSSKiB)/1024, atWarm.FDs,
		float64(end.RSSKiB)/1024, end.FDs, end.Records, float64(worst.RSSKiB)/1024, worst.FDs, float64(peak.RSSKiB)/1024, peak.FDs)
	if limit := atWarm.RSSKiB*5/4 + soakRSSGrowth; worst.RSSKiB > limit {
		bugErrorf(t, "the daemon's RSS grew past its bound after the warm-up: a level of %d KiB, bound %d KiB (level at warm-up %d KiB)", worst.RSSKiB, limit, atWarm.RSSKiB)
	}
	if limit := 2*atWarm.RSSKiB + soakRSSGrowth; peak.RSSKiB > limit {
		bugErrorf(t, "the daemon's RSS burst past its bound after the warm-up: %d KiB, bound %d KiB (level at warm-up %d KiB)", peak.RSSKiB, limit, atWarm.RSSKiB)
	}
	if worst.FDs > atWarm.FDs+soakFDGrowth {
		bugErrorf(t, "the daemon's open descriptors grew past their bound after the warm-up: a level of %d, at warm-up %d", worst.FDs, atWarm.FDs)
	}
	if peak.FDs > 2*atWarm.FDs+soakFDGrowth {
		bugErrorf(t, "the daemon's open descriptors burst past their bound after the warm-up: %d, level at warm-up %d", peak.FDs, atWarm.FDs)
	}

	// Every acknowledged write is in the log; each file holds its last.
	for k := 0; k < 2; k++ {
		p := fmt.Sprintf("memory/soak-%d.md", k)
		recorded := map[string]bool{}
		for _, h := range historyHashes(t, e, p) {
			recorded[h] = true
		}
		for _, c := range acked[k] {
			if !recorded[sha(c)] {
				bugErrorf(t, "%s: a write of %q returned success and has no version in the log", p, c)
			}
		}
		if len(acked[k]) == 0 {
			t.Fatalf("writer %d had no write acknowledged", k)
		}
		if got := e.Read(p); got != acked[k][len(acked[k])-1] {
			bugErrorf(t, "%s holds %q, its last acknowledged write was %q", p, got, acked[k][len(acked[k])-1])
		}
		t.Logf("%s: %d acknowledged writes, all recorded", p, len(acked[k]))
	}
	expectOK(t, "verify", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
}

const (
	soakRSSGrowth = 16 << 10 // KiB
	soakFDGrowth  = 32
)
