// Command bench measures aerfs side by side with the native filesystem and
// a plain go-fuse loopback (with and without kernel passthrough), in one
// run, and writes the table as text and JSON. See docs/performance.md.
//
//	go run ./scripts/bench [-quick] [-o bench/results/FILE.json]
//
// It needs root (FUSE mounts, drop_caches), fio, git and tar, and the
// binaries bin/aerfs and bin/aerfs-loopback (make bench builds them).
// Every mount it makes is unmounted on the way out, also on an error or an
// interrupt, and no process it started is left running.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "aerfs-bench: "+format+"\n", a...)
	runCleanups()
	os.Exit(1)
}

type options struct {
	out      string
	quick    bool
	runs     int
	aerfs    string
	loopback string
	baseDir  string
	src      string
	only     string
	keep     bool
	noMicro  bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == workerArg {
		workerMain(os.Args[2:])
		return
	}
	var o options
	flag.StringVar(&o.out, "o", "", "JSON output file (default bench/results/<date>-<host>[-quick].json)")
	flag.BoolVar(&o.quick, "quick", false, "small sizes and 3 runs: a check that everything works, not a measurement")
	flag.IntVar(&o.runs, "runs", 0, "runs per figure (default 5, quick 3)")
	flag.StringVar(&o.aerfs, "aerfs", "bin/aerfs", "aerfs binary")
	flag.StringVar(&o.loopback, "loopback", "bin/aerfs-loopback", "loopback helper binary")
	flag.StringVar(&o.baseDir, "dir", "/var/tmp", "directory for the backing directories (its filesystem is the one measured)")
	flag.StringVar(&o.src, "src", "", "source tree to untar (default: golang.org/x/sys from the Go module cache)")
	flag.StringVar(&o.only, "only", "", "comma-separated workloads to run: fio,meta,tree,untar,git,commit,commit8,open,rtt,confine,net,micro")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory")
	flag.BoolVar(&o.noMicro, "no-micro", false, "skip the Go microbenchmarks")
	flag.Parse()
	if err := run(o); err != nil {
		fatalf("%v", err)
	}
}

func want(o options, name string) bool {
	if o.only == "" {
		return true
	}
	for _, s := range strings.Split(o.only, ",") {
		if s == name {
			return true
		}
	}
	return false
}

func checkTools() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("must run as root (FUSE mounts with allow_other, kernel passthrough, drop_caches)")
	}
	if _, err := exec.LookPath("fio"); err != nil {
		return fmt.Errorf("fio is not installed\n  install it: apt-get install -y fio")
	}
	for _, t := range []string{"git", "tar", "ls", "du", "go"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s is not installed", t)
		}
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		return fmt.Errorf("/dev/fuse: %v", err)
	} else {
		f.Close()
	}
	return nil
}

func run(o options) error {
	defer runCleanups()
	if err := checkTools(); err != nil {
		return err
	}
	for _, p := range []*string{&o.aerfs, &o.loopback} {
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(a); err != nil {
			return fmt.Errorf("%s not found\n  build it: make bench (or go build -o bin/aerfs ./cmd/aerfs; go build -o bin/aerfs-loopback ./cmd/aerfs-loopback)", *p)
		}
		*p = a
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	// Interrupts: stop the running workload, then unmount everything.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "\naerfs-bench: %v: stopping, unmounting\n", s)
		killChildren()
		time.Sleep(200 * time.Millisecond)
		runCleanups()
		os.Exit(130)
	}()

	b := &bench{aerfsBin: o.aerfs, self: self, quick: o.quick, res: newResults()}
	runs := 5
	b.fioSize, b.metaN, b.treeN, b.latN = "256M", 10000, 10000, 300
	if o.quick {
		runs = 3
		b.fioSize, b.metaN, b.treeN, b.latN = "32M", 2000, 2000, 100
	}
	if o.runs > 0 {
		runs = o.runs
	}
	base, err := os.MkdirTemp(o.baseDir, "aerfs-bench-")
	if err != nil {
		return err
	}
	b.base = base
	if !o.keep {
		atExit(func() {
			// Only once nothing is mounted below base: never remove
			// through a live mount.
			for _, n := range []string{"ws", "ws-nopt", tLoop, tNoPT} {
				if mounted(filepath.Join(base, n)) {
					fmt.Fprintf(os.Stderr, "aerfs-bench: %s still mounted; leaving %s\n", n, base)
					return
				}
			}
			os.RemoveAll(base)
		})
	}
	os.MkdirAll(filepath.Join(base, "home"), 0o755)
	b.canDrop = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0) == nil
	mach := machineInfo(base)
	fmt.Fprintf(os.Stderr, "aerfs-bench: %s, %d runs, scratch %s (%s)\n", map[bool]string{true: "quick", false: "full"}[o.quick], runs, base, mach.Filesystem)

	if want(o, "untar") || want(o, "git") {
		if b.tarball, err = makeTarball(base, o.src); err != nil {
			return err
		}
	}

	var targets []*target
	nat, err := setupNative(base)
	if err != nil {
		return err
	}
	targets = append(targets, nat)
	lo, err := setupLoopback(base, o.loopback, tLoop, true)
	if err != nil {
		return err
	}
	targets = append(targets, lo)
	nopt, err := setupLoopback(base, o.loopback, tNoPT, false)
	if err != nil {
		return err
	}
	targets = append(targets, nopt)
	ae, err := setupAerfs(base, o.aerfs, tAerfs, "ws")
	if err != nil {
		return err
	}
	targets = append(targets, ae)
	aenopt, err := setupAerfs(base, o.aerfs, tAerfsNoPT, "ws-nopt", "--no-passthrough")
	if err != nil {
		return err
	}
	targets = append(targets, aenopt)
	b.aerfsWS = ae.Root

	for _, t := range targets {
		if want(o, "tree") {
			if err := b.prepTree(t); err != nil {
				return fmt.Errorf("%s: tree: %w", t.Name, err)
			}
		}
		if want(o, "git") {
			if err := b.prepRepo(t); err != nil {
				return fmt.Errorf("%s: repo: %w", t.Name, err)
			}
		}
	}

	type workload struct {
		name string
		fn   func(*target, int) error
	}
	wls := []workload{{"fio", b.wlFio}, {"meta", b.wlMeta}, {"tree", b.wlTree}, {"untar", b.wlUntar},
		{"git", b.wlGit}, {"commit", b.wlCommit}, {"commit8", b.wlCommit8}, {"open", b.wlOpen}, {"rtt", b.wlRTT}, {"confine", b.wlConfine}, {"net", b.wlNet}}
	start := time.Now()
	for rep := 0; rep < runs; rep++ {
		for _, w := range wls {
			if !want(o, w.name) {
				continue
			}
			fmt.Fprintf(os.Stderr, "  run %d/%d  %s\n", rep+1, runs, w.name)
			// Rotate the order of the targets from run to run, so that
			// none is always measured first.
			for i := range targets {
				t := targets[(i+rep)%len(targets)]
				// Start each measurement with no dirty data of the
				// previous one still being written back.
				syscall.Sync()
				if err := w.fn(t, rep); err != nil {
					return fmt.Errorf("%s on %s: %w", w.name, t.Name, err)
				}
			}
		}
	}
	rss, hwm := rssKiB(ae.PID)
	elapsed := time.Since(start)

	var micro []*Micro
	if !o.noMicro && want(o, "micro") {
		if micro, err = runMicro(runs, o.quick); err != nil {
			return err
		}
	}

	mach.LoadEnd = loadavg()
	rows := b.res.finish()
	rep := &Report{
		Date: time.Now().UTC().Format(time.RFC3339), Machine: mach, Quick: o.quick, Runs: runs,
		Sizes: Sizes{FioFile: b.fioSize, MetaFiles: b.metaN, TreeEntries: b.treeN, LatencyOps: b.latN, SourceTree: b.tarball},
		Rows:  rows, Micro: micro, DaemonRSSKiB: rss, DaemonPeakKiB: hwm, ElapsedS: elapsed.Seconds(),
	}
	rep.Checks = checks(rows, micro)
	table := rep.Text()
	fmt.Print(table)

	out := o.out
	if out == "" {
		host, _ := os.Hostname()
		suffix := ""
		if o.quick {
			suffix = "-quick"
		}
		out = filepath.Join("bench", "results", time.Now().Format("2006-01-02")+"-"+host+suffix+".json")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(j, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "aerfs-bench: wrote %s\n", out)
	return nil
}

// makeTarball tars the source tree that the untar and git workloads use.
func makeTarball(base, src string) (string, error) {
	if src == "" {
		mc, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("go env GOMODCACHE: %v", err)
		}
		cache := strings.TrimSpace(string(mc))
		for _, pat := range []string{"golang.org/x/sys@*", "github.com/spf13/cobra@*"} {
			if m, _ := filepath.Glob(filepath.Join(cache, pat)); len(m) > 0 {
				src = m[len(m)-1]
				break
			}
		}
		if src == "" {
			return "", fmt.Errorf("no source tree in the Go module cache\n  run go mod download in the repository, or pass -src DIR")
		}
	}
	tb := filepath.Join(base, filepath.Base(src)+".tar")
	// Module cache directories are read-only; make the copies writable so
	// the workloads can remove them.
	if out, err := exec.Command("tar", "--mode=u+w", "-C", filepath.Dir(src), "-cf", tb, filepath.Base(src)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("tar %s: %v: %s", src, err, out)
	}
	return tb, nil
}

var _ = runtime.NumCPU
