package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// The guarded-commit workload (-only gcommit): open–write 4 KiB–fsync–close
// of MEMORY.md by a USER session with 1 and with 8 concurrent writers, the
// same loop on a plain file of the other targets in the same run, the
// ratio to the loopback, and the evidence each guarded commit adds before
// and after `aerfs gc`.
var guardedRowDefs = []rowDef{
	{"gw1-p50", "guarded commit p50, 1 writer", "µs", false, "-", "aerfs column: open–write 4 KiB (random letters)–fsync–close of MEMORY.md by a USER session; other columns: the same on a plain file"},
	{"gw1-p99", "guarded commit p99, 1 writer", "µs", false, "-", "as above"},
	{"gw1-x50", "guarded commit p50 ÷ loopback, 1 writer", "×", false, "-", "aerfs column: guarded p50 over the loopback's plain p50 of the same run (cost; 1× = equal)"},
	{"gw1-x99", "guarded commit p99 ÷ loopback, 1 writer", "×", false, "-", "as above, p99"},
	{"gw8-p50", "guarded commit p50, 8 writers", "µs", false, "-", "8 threads of one process, all on MEMORY.md (plain columns: one plain file)"},
	{"gw8-p99", "guarded commit p99, 8 writers", "µs", false, "-", "as above"},
	{"gw8-x50", "guarded commit p50 ÷ loopback, 8 writers", "×", false, "-", "as gw1-x50"},
	{"gw8-x99", "guarded commit p99 ÷ loopback, 8 writers", "×", false, "-", "as gw1-x99"},
	{"ev-commit", "evidence per guarded commit", "B", false, "-", "growth of the evidence directory over this workload's guarded commits (records, index, hashes, blobs)"},
	{"ev-commit-gc", "evidence per guarded commit after aerfs gc", "B", false, "-", "the same after aerfs gc --keep-last 10 --keep-within 0"},
}

func init() {
	// After the existing guarded rows.
	for i, d := range rowDefs {
		if d.key == "guarded-ops" {
			rowDefs = append(rowDefs[:i+1], append(append([]rowDef{}, guardedRowDefs...), rowDefs[i+1:]...)...)
			return
		}
	}
	rowDefs = append(rowDefs, guardedRowDefs...)
}

// finishGuarded fills the ratio rows from the paired samples of each run
// (run i of aerfs over run i of the loopback) and gives the latency rows'
// plain columns.
func (r *Results) finishGuarded() {
	for _, w := range []string{"gw1", "gw8"} {
		for _, q := range []string{"50", "99"} {
			a, l := r.rows[w+"-p"+q].samples[tAerfs], r.rows[w+"-p"+q].samples[tLoop]
			for i := 0; i < len(a) && i < len(l); i++ {
				if l[i] > 0 {
					r.rows[w+"-x"+q].samples[tAerfs] = append(r.rows[w+"-x"+q].samples[tAerfs], a[i]/l[i])
				}
			}
		}
	}
}

func evidenceBytes(stateDir string) int64 {
	var n int64
	filepath.Walk(filepath.Join(stateDir, "evidence"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func (b *bench) gc() error {
	_, _, err := b.run("/", b.aerfsBin, "gc", "--workspace", b.aerfsWS, "--keep-last", "10", "--keep-within", "0")
	return err
}

func (b *bench) wlGuardedCommit(t *target, rep int) error {
	if t.Name == tAerfsNoPT {
		return nil
	}
	n := strconv.Itoa(b.latN)
	if t.Name != tAerfs {
		for _, w := range []string{"1", "8"} {
			out, err := b.worker(t.Dir, "commitpar", filepath.Join(t.Dir, "gcommit.dat"), n, w)
			if err != nil {
				return err
			}
			l, err := parseLat(out)
			if err != nil {
				return err
			}
			b.res.add("gw"+w+"-p50", t.Name, l.P50us)
			b.res.add("gw"+w+"-p99", t.Name, l.P99us)
		}
		return nil
	}
	state := b.aerfsWS + "-state"
	if err := b.gc(); err != nil {
		return err
	}
	before := evidenceBytes(state)
	commits := 0
	for _, w := range []string{"1", "8"} {
		out, err := b.inSession("USER", fmt.Sprintf("bench-gcommit-%d-%d-%s", os.Getpid(), rep, w),
			"commitpar", filepath.Join(t.Root, "MEMORY.md"), n, w)
		if err != nil {
			return err
		}
		l, err := parseLat(out)
		if err != nil {
			return err
		}
		b.res.add("gw"+w+"-p50", t.Name, l.P50us)
		b.res.add("gw"+w+"-p99", t.Name, l.P99us)
		commits += l.N + 5*atoi(w) // and the warm-up commits
	}
	// Records queued for the next group commit are on disk once status
	// (a sync) answers; the gc flushes as well.
	b.run("/", b.aerfsBin, "status", "--workspace", b.aerfsWS)
	grown := evidenceBytes(state)
	if err := b.gc(); err != nil {
		return err
	}
	after := evidenceBytes(state)
	b.res.add("ev-commit", t.Name, float64(grown-before)/float64(commits))
	b.res.add("ev-commit-gc", t.Name, float64(after-before)/float64(commits))
	return nil
}

// workerCommitPar runs workerCommit's loop (with fsync) in w threads at
// once, n commits each, and pools their latencies.
func workerCommitPar(path string, n, w int) (*LatResult, error) {
	var mu sync.Mutex
	var all []time.Duration
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, err := commitLoop(path, n, true, k, true)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			all = append(all, lat...)
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return summarise(all, time.Since(start), 0, ""), nil
}
