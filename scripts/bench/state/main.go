// Command state measures what the cost of a mount, of history and of the
// daemon's memory does with the length of the evidence log (make
// bench-state; docs/performance.md, "State that scales"). For each size it
// writes a signed log of N records with N/100 sessions (scripts/bench/genlog,
// straight through the evidence package), mounts aerfs over it, and
// measures:
//
//   - mount: wall time of `aerfs mount` until it serves (median of 3), with
//     the log's index as the daemon leaves it, and once with the index
//     removed (rebuilt from the whole log: the first mount of a log written
//     before the index existed);
//   - history: wall time of `aerfs history MEMORY.md` (the most written
//     file; median of 5), and how many versions it lists;
//   - the daemon's RSS after the mount and after the commits;
//   - guarded commit p50: open-write-close of MEMORY.md in a USER session,
//     200 times (the close commits).
//
// It needs root (FUSE), and bin/aerfs and bin/aerfs-genlog (make
// bench-state builds them).
//
//	go run ./scripts/bench/state [-sizes 10000,100000,1000000] [-o FILE.json]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aerfs/aerfs/internal/procstat"
)

type row struct {
	Records        int     `json:"records"`
	Sessions       int     `json:"sessions"`
	LogBytes       int64   `json:"log_bytes"`
	IndexBytes     int64   `json:"index_bytes"`
	GenerateS      float64 `json:"generate_s"`
	MountS         float64 `json:"mount_s"`
	MountRebuildS  float64 `json:"mount_rebuild_s"`
	HistoryMS      float64 `json:"history_ms"`
	HistoryVers    int     `json:"history_versions"`
	RSSMountKiB    int64   `json:"rss_after_mount_kib"`
	RSSCommitsKiB  int64   `json:"rss_after_commits_kib"`
	CommitP50MS    float64 `json:"commit_p50_ms"`
	LiveSessions   int     `json:"live_sessions_after"`
	DaemonFDsAfter int     `json:"daemon_fds_after"`
}

var (
	aerfs  = flag.String("aerfs", "bin/aerfs", "aerfs binary")
	genlog = flag.String("genlog", "bin/aerfs-genlog", "log generator binary")
	sizes  = flag.String("sizes", "10000,100000,1000000", "records per log, comma-separated")
	dir    = flag.String("dir", "/var/tmp", "where the workspaces go")
	out    = flag.String("o", "", "JSON output (default bench/results/<date>-<host>-state.json)")
	keep   = flag.Bool("keep", false, "keep the workspaces")
)

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "aerfs-bench-state: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	flag.Parse()
	if os.Geteuid() != 0 {
		fatalf("must run as root (FUSE mounts)")
	}
	for _, p := range []*string{aerfs, genlog} {
		a, err := filepath.Abs(*p)
		if err != nil || !exists(a) {
			fatalf("%s not found\n  build it: make bench-state", *p)
		}
		*p = a
	}
	var rows []row
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1000 {
			fatalf("bad size %q", s)
		}
		r, err := measure(n)
		if err != nil {
			fatalf("%d records: %v", n, err)
		}
		rows = append(rows, r)
		printTable(rows)
	}
	file := *out
	if file == "" {
		host, _ := os.Hostname()
		file = filepath.Join("bench", "results", time.Now().UTC().Format("2006-01-02")+"-"+host+"-state.json")
	}
	os.MkdirAll(filepath.Dir(file), 0o755)
	b, _ := json.MarshalIndent(map[string]any{"date": time.Now().UTC(), "rows": rows}, "", "  ")
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		fatalf("%v", err)
	}
	fmt.Printf("aerfs-bench-state: wrote %s\n", file)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = "/"
	b, err := cmd.CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, b)
	}
	return string(b), nil
}

func timed(name string, args ...string) (time.Duration, error) {
	t := time.Now()
	_, err := run(name, args...)
	return time.Since(t), err
}

func median(ds []float64) float64 {
	sort.Float64s(ds)
	return ds[len(ds)/2]
}

func measure(n int) (row, error) {
	r := row{Records: n, Sessions: max(n/100, 10)}
	base := filepath.Join(*dir, fmt.Sprintf("aerfs-bench-state-%d", n))
	os.RemoveAll(base)
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return r, err
	}
	if !*keep {
		defer os.RemoveAll(base)
	}
	if _, err := run(*aerfs, "init", ws, "--state", state); err != nil {
		return r, err
	}
	fmt.Fprintf(os.Stderr, "== %d records, %d sessions: generating\n", n, r.Sessions)
	d, err := timed(*genlog, "-state", state, "-workspace", ws, "-records", fmt.Sprint(n), "-sessions", fmt.Sprint(r.Sessions))
	if err != nil {
		return r, err
	}
	r.GenerateS = d.Seconds()
	r.LogBytes = size(filepath.Join(state, "evidence", "log"))
	r.IndexBytes = dirSize(filepath.Join(state, "evidence", "ix"))
	unmount := func() { run(*aerfs, "unmount", ws) }
	defer unmount()

	// The first mount of a log without its index: rebuilt from the log.
	os.RemoveAll(filepath.Join(state, "evidence", "ix"))
	d, err = timed(*aerfs, "mount", "--state", state, ws)
	if err != nil {
		return r, err
	}
	r.MountRebuildS = d.Seconds()
	unmount()
	var mounts []float64
	for i := 0; i < 3; i++ {
		d, err := timed(*aerfs, "mount", "--state", state, ws)
		if err != nil {
			return r, err
		}
		mounts = append(mounts, d.Seconds())
		if i < 2 {
			unmount()
		}
	}
	r.MountS = median(mounts)
	pid, err := daemonPid(state)
	if err != nil {
		return r, err
	}
	time.Sleep(time.Second) // what the daemon keeps, not what the mount touched on its way
	r.RSSMountKiB = procstat.RSS(pid)

	var hist []float64
	for i := 0; i < 5; i++ {
		t := time.Now()
		o, err := run(*aerfs, "history", "--json", "--state", state, "--workspace", ws, "MEMORY.md")
		if err != nil {
			return r, err
		}
		hist = append(hist, float64(time.Since(t).Microseconds())/1000)
		var vs []any
		json.Unmarshal([]byte(o[strings.Index(o, "["):]), &vs)
		r.HistoryVers = len(vs)
	}
	r.HistoryMS = median(hist)

	script := `
import time, sys
lat = []
for i in range(200):
    t = time.perf_counter()
    with open("MEMORY.md", "a") as f:
        f.write("bench line %d\n" % i)
    lat.append(time.perf_counter() - t)
lat.sort()
print(lat[len(lat)//2] * 1000)
`
	cmd := exec.Command(*aerfs, "run", "--workspace", ws, "--state", state, "--principal", "USER", "--session", "bench-commit", "--", "python3", "-c", script)
	cmd.Dir = ws
	o, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("commits: %v", err)
	}
	r.CommitP50MS, _ = strconv.ParseFloat(strings.TrimSpace(string(o)), 64)
	time.Sleep(time.Second)
	r.RSSCommitsKiB = procstat.RSS(pid)
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		r.DaemonFDsAfter = len(fds)
	}
	if st, err := run(*aerfs, "status", "--json", "--state", state); err == nil {
		var s struct {
			Sessions []any `json:"sessions"`
		}
		json.Unmarshal([]byte(st), &s)
		r.LiveSessions = len(s.Sessions)
	}
	return r, nil
}

func daemonPid(state string) (int, error) {
	o, err := run(*aerfs, "status", "--json", "--state", state)
	if err != nil {
		return 0, err
	}
	var s struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(o), &s); err != nil || s.PID == 0 {
		return 0, fmt.Errorf("status: %v %s", err, o)
	}
	return s.PID, nil
}

func size(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func dirSize(d string) int64 {
	var n int64
	filepath.Walk(d, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func printTable(rows []row) {
	fmt.Println()
	fmt.Println("State that scales (docs/performance.md): the log's index, a mount, history and the daemon's memory against the log's length")
	fmt.Println()
	fmt.Println("| records | sessions | log | index | generate | mount | mount, index rebuilt | history MEMORY.md (versions) | daemon RSS after mount | RSS after 200 commits | commit p50 | live sessions | daemon fds |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %d | %d | %.0f MiB | %.1f MiB | %.1f s | %.3f s | %.2f s | %.0f ms (%d) | %.1f MiB | %.1f MiB | %.2f ms | %d | %d |\n",
			r.Records, r.Sessions, float64(r.LogBytes)/(1<<20), float64(r.IndexBytes)/(1<<20), r.GenerateS, r.MountS, r.MountRebuildS,
			r.HistoryMS, r.HistoryVers, float64(r.RSSMountKiB)/1024, float64(r.RSSCommitsKiB)/1024, r.CommitP50MS, r.LiveSessions, r.DaemonFDsAfter)
	}
	if len(rows) == 0 {
		return
	}
	last, first := rows[len(rows)-1], rows[0]
	fmt.Println()
	fmt.Println("| target | value | need | met |")
	fmt.Println("|---|---|---|---|")
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**MISS**"
	}
	fmt.Printf("| mount at %d records | %.3f s | ≤ 1 s | %s |\n", last.Records, last.MountS, yes(last.MountS <= 1))
	fmt.Printf("| daemon RSS at %d records, %d sessions | %.1f MiB | ≤ 64 MiB | %s |\n", last.Records, last.Sessions,
		float64(max(last.RSSMountKiB, last.RSSCommitsKiB))/1024, yes(max(last.RSSMountKiB, last.RSSCommitsKiB) <= 64<<10))
	fmt.Printf("| history MEMORY.md at %d records | %.0f ms | ≤ 100 ms | %s |\n", last.Records, last.HistoryMS, yes(last.HistoryMS <= 100))
	ratio := last.CommitP50MS / first.CommitP50MS
	fmt.Printf("| commit p50, %d against %d records | %.2f× | flat (≤ 1.5×) | %s |\n", last.Records, first.Records, ratio, yes(ratio <= 1.5))
}
