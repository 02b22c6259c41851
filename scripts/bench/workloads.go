package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Row is one figure of the table.
type Row struct {
	Key    string             `json:"key"`
	Name   string             `json:"name"`
	Unit   string             `json:"unit"`
	Higher bool               `json:"higher_is_better"`
	Cache  string             `json:"cache"`
	Note   string             `json:"note,omitempty"`
	Stats  map[string]*Stat   `json:"targets"`
	Speed  map[string]float64 `json:"speed"`

	samples map[string][]float64
}

type rowDef struct {
	key, name, unit string
	higher          bool
	cache           string
	note            string
}

// The rows, in table order.
var rowDefs = []rowDef{
	{"seqwrite", "fio seq write 1 MiB", "MiB/s", true, "warm", "psync, no fsync: the write path into the page cache"},
	{"seqread", "fio seq read 1 MiB", "MiB/s", true, "warm", "file just written"},
	{"seqread-cold", "fio seq read 1 MiB", "MiB/s", true, "cold", "drop_caches before"},
	{"randwrite", "fio rand write 4 KiB", "IOPS", true, "warm", "overwrite of the existing file"},
	{"randread", "fio rand read 4 KiB", "IOPS", true, "warm", ""},
	{"create", "create small files", "ops/s", true, "-", "open(O_CREAT|O_EXCL)+write 100 B+close"},
	{"stat", "stat small files", "ops/s", true, "-", "lstat right after create"},
	{"unlink", "unlink small files", "ops/s", true, "-", ""},
	{"meta-bar", "create+stat+unlink (bar)", "ops/s", true, "-", "files per second through all three phases of a fresh run of 3,000 files (2,000 with -quick)"},
	{"lsR", "ls -lR tree", "s", false, "warm", "backing caches warm, FUSE entry/attr caches expired (1.1 s idle)"},
	{"lsR-again", "ls -lR tree, again", "s", false, "warm", "the same listing 1.1 s after the first: what a repeated listing costs"},
	{"lsR-cold", "ls -lR tree", "s", false, "cold", "drop_caches before"},
	{"du", "du -s tree", "s", false, "warm", "FUSE caches expired (1.1 s idle)"},
	{"untar", "untar source tree", "s", false, "warm", "tarball in page cache; no sync"},
	{"gitstatus", "git status", "s", false, "warm", "FUSE caches expired (1.1 s idle)"},
	{"gitstatus-again", "git status, again", "s", false, "warm", "the same command 1.1 s after the first"},
	{"fsync-p50", "open–write 4 KiB–fsync–close p50", "µs", false, "-", "plain file"},
	{"fsync-p99", "open–write 4 KiB–fsync–close p99", "µs", false, "-", "plain file"},
	{"fsync-ops", "open–write 4 KiB–fsync–close", "ops/s", true, "-", "plain file, one process"},
	{"guarded-p50", "guarded commit p50", "µs", false, "-", "aerfs column: open–write 4 KiB–close of MEMORY.md by a USER session (durable at close); other columns: the plain fsync loop"},
	{"guarded-p99", "guarded commit p99", "µs", false, "-", "as above"},
	{"guarded-ops", "guarded commit", "ops/s", true, "-", "as above"},
	{"fsync8-p50", "8 writers: open–write 4 KiB–fsync–close p50", "µs", false, "-", "eight processes at once, each its own plain file"},
	{"fsync8-p99", "8 writers: open–write 4 KiB–fsync–close p99", "µs", false, "-", "as above"},
	{"guarded8-p50", "8 writers: guarded commit p50", "µs", false, "-", "aerfs column: eight USER sessions at once, each committing its own memory/ file (durable at close); other columns: the 8-writer plain fsync loop"},
	{"guarded8-p99", "8 writers: guarded commit p99", "µs", false, "-", "as above"},
	{"evidence-commit", "evidence per guarded commit", "B", false, "-", "aerfs column: stored content ÷ guarded commits after the commit rows (a 4 KiB file rewritten each time)"},
	{"evidence-commit-gc", "evidence per guarded commit after aerfs gc", "B", false, "-", "the same after aerfs gc --keep-last 10 --keep-within 0"},
	{"rtt", "FUSE round trip p50", "µs", false, "-", "getxattr of an absent user.* attribute: one request, never cached (native: the system call alone)"},
	{"rtt-same", "FUSE round trip p50, one CPU", "µs", false, "-", "the same with the caller and every server thread on CPU 0"},
	{"rtt-cross", "FUSE round trip p50, two CPUs", "µs", false, "-", "the caller on CPU 0, every server thread on CPU 1"},
	{"open-p50", "open(O_WRONLY) plain file p50", "µs", false, "-", "existing file, entry cached"},
	{"refused-p50", "refused open p50", "µs", false, "-", "aerfs column: WEB session opens SOUL.md for write (EACCES); other columns: plain open"},
}

// Results collects samples by row and target.
type Results struct {
	mu   sync.Mutex
	rows map[string]*Row
}

func newResults() *Results {
	r := &Results{rows: map[string]*Row{}}
	for _, d := range rowDefs {
		r.rows[d.key] = &Row{Key: d.key, Name: d.name, Unit: d.unit, Higher: d.higher, Cache: d.cache, Note: d.note,
			samples: map[string][]float64{}}
	}
	return r
}

func (r *Results) add(key, target string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	row := r.rows[key]
	if row == nil {
		panic("unknown row " + key)
	}
	row.samples[target] = append(row.samples[target], v)
}

// finish computes statistics and speed ratios in table order.
func (r *Results) finish() []*Row {
	// The guarded and refused rows compare against the plain loops of the
	// other targets, measured in the same runs.
	for _, p := range [][2]string{{"guarded-p50", "fsync-p50"}, {"guarded-p99", "fsync-p99"}, {"guarded-ops", "fsync-ops"}, {"refused-p50", "open-p50"},
		{"guarded8-p50", "fsync8-p50"}, {"guarded8-p99", "fsync8-p99"}} {
		if len(r.rows[p[0]].samples[tAerfs]) == 0 {
			continue
		}
		for _, t := range []string{tNative, tLoop, tNoPT} {
			if s := r.rows[p[1]].samples[t]; len(s) > 0 {
				r.rows[p[0]].samples[t] = s
			}
		}
	}
	var out []*Row
	for _, d := range rowDefs {
		row := r.rows[d.key]
		row.Stats = map[string]*Stat{}
		for t, s := range row.samples {
			row.Stats[t] = newStat(s)
		}
		if len(row.Stats) == 0 {
			continue
		}
		st := row.Stats
		row.Speed = map[string]float64{}
		for k, v := range map[string]float64{
			"aerfs/native":             speed(st[tAerfs], st[tNative], row.Higher),
			"aerfs/loopback":           speed(st[tAerfs], st[tLoop], row.Higher),
			"loopback-nopt/native":     speed(st[tNoPT], st[tNative], row.Higher),
			"loopback/native":          speed(st[tLoop], st[tNative], row.Higher),
			"aerfs-nopt/native":        speed(st[tAerfsNoPT], st[tNative], row.Higher),
			"aerfs-nopt/loopback-nopt": speed(st[tAerfsNoPT], st[tNoPT], row.Higher),
		} {
			// JSON has no NaN: a ratio that cannot be formed is absent.
			if !math.IsNaN(v) {
				row.Speed[k] = v
			}
		}
		out = append(out, row)
	}
	return out
}

// bench holds what every workload needs.
type bench struct {
	base string
	// guardedCommits counts the guarded commits made on the aerfs target.
	guardedCommits int
	aerfsBin       string
	self           string
	quick          bool
	fioSize        string
	metaN          int
	treeN          int
	latN           int
	tarball        string
	canDrop        bool
	res            *Results
	aerfsWS        string
	verbose        bool
}

var (
	childMu sync.Mutex
	childs  = map[int]bool{}
)

// run executes a workload command in its own process group, so that an
// interrupt can stop it before the mounts go.
func (b *bench) run(dir string, name string, args ...string) ([]byte, time.Duration, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(b.base, "home"), "GIT_CONFIG_NOSYSTEM=1",
		"LC_ALL=C", "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	childMu.Lock()
	childs[cmd.Process.Pid] = true
	childMu.Unlock()
	err := cmd.Wait()
	d := time.Since(t)
	childMu.Lock()
	delete(childs, cmd.Process.Pid)
	childMu.Unlock()
	if err != nil {
		return stdout.Bytes(), d, fmt.Errorf("%s %v: %v: %s", name, args, err, lastLines(stderr.String()))
	}
	return stdout.Bytes(), d, nil
}

func killChildren() {
	childMu.Lock()
	defer childMu.Unlock()
	for pid := range childs {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func lastLines(s string) string {
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

func (b *bench) worker(dir string, args ...string) ([]byte, error) {
	out, _, err := b.run(dir, b.self, append([]string{workerArg}, args...)...)
	return out, err
}

// inSession runs a worker under `aerfs run` as principal p in a new session.
func (b *bench) inSession(principal, session string, args ...string) ([]byte, error) {
	a := []string{"run", "--workspace", b.aerfsWS, "--principal", principal, "--session", session, "--", b.self, workerArg}
	out, _, err := b.run("/", b.aerfsBin, append(a, args...)...)
	return out, err
}

func (b *bench) dropCaches() {
	if !b.canDrop {
		return
	}
	syscall.Sync()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}

// idle lets the kernel's FUSE entry and attribute caches (1 s) expire.
func idle() { time.Sleep(1100 * time.Millisecond) }

type fioOut struct {
	Jobs []struct {
		Read struct {
			BwBytes float64 `json:"bw_bytes"`
			IOPS    float64 `json:"iops"`
		} `json:"read"`
		Write struct {
			BwBytes float64 `json:"bw_bytes"`
			IOPS    float64 `json:"iops"`
		} `json:"write"`
	} `json:"jobs"`
}

// fio runs one fio job over the target's 256 MiB file, loops times over.
func (b *bench) fio(t *target, rw, bs string, loops int) (bw, iops float64, err error) {
	out, _, err := b.run(t.Dir, "fio", "--name=aerfs-bench", "--filename="+filepath.Join(t.Dir, "fio.dat"),
		"--rw="+rw, "--bs="+bs, "--size="+b.fioSize, "--ioengine=psync", "--fallocate=none",
		"--invalidate=0", "--numjobs=1", "--loops="+strconv.Itoa(loops), "--output-format=json")
	if err != nil {
		return 0, 0, err
	}
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var f fioOut
	if err := json.Unmarshal(out, &f); err != nil || len(f.Jobs) == 0 {
		return 0, 0, fmt.Errorf("fio output: %v", err)
	}
	j := f.Jobs[0]
	if j.Read.BwBytes > 0 {
		return j.Read.BwBytes / (1 << 20), j.Read.IOPS, nil
	}
	return j.Write.BwBytes / (1 << 20), j.Write.IOPS, nil
}

// Passes over the file per warm read sample. One pass over 256 MiB from the
// page cache takes about 40 ms, short enough for fio's own timing and the
// scheduler to decide the figure; eight make a sample of a third of a second.
const warmReadLoops = 8

func (b *bench) wlFio(t *target, rep int) error {
	// An unmeasured write first, removed at once: the measured write then
	// gets page-cache memory the guest has just used. Single 256 MiB writes
	// varied tenfold from run to run without it, most likely because the
	// virtual machine hands memory left free for a few seconds back to its
	// host (free page reporting), which must then fault it in again.
	dat := filepath.Join(t.Dir, "fio.dat")
	os.Remove(dat)
	if _, _, err := b.fio(t, "write", "1M", 1); err != nil {
		return err
	}
	os.Remove(dat)
	bw, _, err := b.fio(t, "write", "1M", 1)
	if err != nil {
		return err
	}
	b.res.add("seqwrite", t.Name, bw)
	if bw, _, err = b.fio(t, "read", "1M", warmReadLoops); err != nil {
		return err
	}
	b.res.add("seqread", t.Name, bw)
	if b.canDrop {
		b.dropCaches()
		if bw, _, err = b.fio(t, "read", "1M", 1); err != nil {
			return err
		}
		b.res.add("seqread-cold", t.Name, bw)
	}
	_, iops, err := b.fio(t, "randwrite", "4k", 1)
	if err != nil {
		return err
	}
	b.res.add("randwrite", t.Name, iops)
	if _, iops, err = b.fio(t, "randread", "4k", warmReadLoops); err != nil {
		return err
	}
	b.res.add("randread", t.Name, iops)
	return os.Remove(filepath.Join(t.Dir, "fio.dat"))
}

func (b *bench) wlMeta(t *target, rep int) error {
	out, err := b.worker(t.Dir, "meta", filepath.Join(t.Dir, "meta"), strconv.Itoa(b.metaN))
	if err != nil {
		return err
	}
	var m MetaResult
	if err := json.Unmarshal(out, &m); err != nil {
		return err
	}
	n := float64(b.metaN)
	b.res.add("create", t.Name, n/m.Create)
	b.res.add("stat", t.Name, n/m.Stat)
	b.res.add("unlink", t.Name, n/m.Unlink)
	// The bar: a smaller run, all three phases together.
	barN := min(3000, b.metaN)
	out, err = b.worker(t.Dir, "meta", filepath.Join(t.Dir, "meta-bar"), strconv.Itoa(barN))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return err
	}
	b.res.add("meta-bar", t.Name, float64(barN)/(m.Create+m.Stat+m.Unlink))
	return nil
}

func (b *bench) prepTree(t *target) error {
	_, err := b.worker(t.Dir, "mktree", filepath.Join(t.Dir, "tree"), strconv.Itoa(b.treeN))
	return err
}

func (b *bench) wlTree(t *target, rep int) error {
	tree := filepath.Join(t.Dir, "tree")
	idle()
	_, d, err := b.run(t.Dir, "ls", "-lR", tree)
	if err != nil {
		return err
	}
	b.res.add("lsR", t.Name, d.Seconds())
	// The same listing a moment later: the loopback's one-second caches
	// have expired again, aerfs's have not.
	idle()
	if _, d, err = b.run(t.Dir, "ls", "-lR", tree); err != nil {
		return err
	}
	b.res.add("lsR-again", t.Name, d.Seconds())
	if b.canDrop {
		b.dropCaches()
		if _, d, err = b.run(t.Dir, "ls", "-lR", tree); err != nil {
			return err
		}
		b.res.add("lsR-cold", t.Name, d.Seconds())
	}
	idle()
	if _, d, err = b.run(t.Dir, "du", "-s", tree); err != nil {
		return err
	}
	b.res.add("du", t.Name, d.Seconds())
	return nil
}

func (b *bench) wlUntar(t *target, rep int) error {
	dst := filepath.Join(t.Dir, fmt.Sprintf("untar-%d", rep))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	_, d, err := b.run(t.Dir, "tar", "-xf", b.tarball, "-C", dst)
	if err != nil {
		return err
	}
	b.res.add("untar", t.Name, d.Seconds())
	_, _, err = b.run(t.Dir, "rm", "-rf", dst)
	return err
}

func (b *bench) prepRepo(t *target) error {
	repo := filepath.Join(t.Dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return err
	}
	for _, c := range [][]string{
		{"tar", "-xf", b.tarball, "-C", repo},
		{"git", "init", "-q"},
		{"git", "add", "-A"},
		{"git", "commit", "-q", "-m", "import"},
		{"git", "status", "--porcelain"},
	} {
		if _, _, err := b.run(repo, c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) wlGit(t *target, rep int) error {
	// The first after the tree sat idle since the previous round; the
	// second a moment later, when aerfs's caches still hold and the
	// loopback's one-second ones do not.
	for _, key := range []string{"gitstatus", "gitstatus-again"} {
		idle()
		out, d, err := b.run(filepath.Join(t.Dir, "repo"), "git", "status", "--porcelain")
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(out)) > 0 {
			return fmt.Errorf("git status in %s: tree not clean: %s", t.Name, lastLines(string(out)))
		}
		b.res.add(key, t.Name, d.Seconds())
	}
	return nil
}

func parseLat(out []byte) (*LatResult, error) {
	var l LatResult
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("worker output %q: %v", out, err)
	}
	return &l, nil
}

func (b *bench) wlCommit(t *target, rep int) error {
	out, err := b.worker(t.Dir, "commit", filepath.Join(t.Dir, "commit.dat"), strconv.Itoa(b.latN), "fsync")
	if err != nil {
		return err
	}
	l, err := parseLat(out)
	if err != nil {
		return err
	}
	b.res.add("fsync-p50", t.Name, l.P50us)
	b.res.add("fsync-p99", t.Name, l.P99us)
	b.res.add("fsync-ops", t.Name, l.OpsSec)
	if t.Name != tAerfs {
		return nil
	}
	out, err = b.inSession("USER", fmt.Sprintf("bench-commit-%d-%d", os.Getpid(), rep),
		"commit", filepath.Join(t.Root, "MEMORY.md"), strconv.Itoa(b.latN), "nofsync")
	if err != nil {
		return err
	}
	if l, err = parseLat(out); err != nil {
		return err
	}
	b.res.add("guarded-p50", t.Name, l.P50us)
	b.res.add("guarded-p99", t.Name, l.P99us)
	b.res.add("guarded-ops", t.Name, l.OpsSec)
	b.guardedCommits += b.latN + 5
	return nil
}

// wlCommit8 is wlCommit with eight writers at once, each on its own file:
// the plain fsync loop on every target, eight USER sessions committing
// memory/ files on aerfs. Then the evidence the guarded commits stored,
// per commit, before and after aerfs gc.
func (b *bench) wlCommit8(t *target, rep int) error {
	const writers = 8
	type res struct {
		l   *LatResult
		err error
	}
	run := func(one func(i int) ([]byte, error)) ([]float64, []float64, error) {
		ch := make(chan res, writers)
		for i := 0; i < writers; i++ {
			go func() {
				out, err := one(i)
				if err != nil {
					ch <- res{nil, err}
					return
				}
				l, err := parseLat(out)
				ch <- res{l, err}
			}()
		}
		var p50, p99 []float64
		for i := 0; i < writers; i++ {
			r := <-ch
			if r.err != nil {
				return nil, nil, r.err
			}
			p50, p99 = append(p50, r.l.P50us), append(p99, r.l.P99us)
		}
		return p50, p99, nil
	}
	median := func(v []float64) float64 { return newStat(v).Median }
	max := func(v []float64) float64 {
		m := v[0]
		for _, x := range v {
			m = math.Max(m, x)
		}
		return m
	}
	p50, p99, err := run(func(i int) ([]byte, error) {
		return b.worker(t.Dir, "commit", filepath.Join(t.Dir, fmt.Sprintf("commit8-%d.dat", i)), strconv.Itoa(b.latN), "fsync")
	})
	if err != nil {
		return err
	}
	b.res.add("fsync8-p50", t.Name, median(p50))
	b.res.add("fsync8-p99", t.Name, max(p99))
	if t.Name != tAerfs {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(t.Root, "memory"), 0o755); err != nil {
		return err
	}
	p50, p99, err = run(func(i int) ([]byte, error) {
		return b.inSession("USER", fmt.Sprintf("bench-commit8-%d-%d-%d", os.Getpid(), rep, i),
			"commit", filepath.Join(t.Root, "memory", fmt.Sprintf("w%d.md", i)), strconv.Itoa(b.latN), "nofsync")
	})
	if err != nil {
		return err
	}
	b.res.add("guarded8-p50", t.Name, median(p50))
	b.res.add("guarded8-p99", t.Name, max(p99))
	b.guardedCommits += writers * (b.latN + 5)
	// Evidence per guarded commit: the stored content over every guarded
	// commit made on this target so far, then the same after gc.
	commits := float64(b.guardedCommits)
	before := dirBytes(filepath.Join(t.State, "evidence", "blobs")) + dirBytes(filepath.Join(t.State, "evidence", "packs"))
	b.res.add("evidence-commit", t.Name, float64(before)/commits)
	if out, _, err := b.run("/", b.aerfsBin, "gc", "--keep-last", "10", "--keep-within", "0", "--workspace", t.Root); err != nil {
		return fmt.Errorf("aerfs gc: %v %s", err, out)
	}
	after := dirBytes(filepath.Join(t.State, "evidence", "blobs")) + dirBytes(filepath.Join(t.State, "evidence", "packs"))
	b.res.add("evidence-commit-gc", t.Name, float64(after)/commits)
	return nil
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func (b *bench) wlOpen(t *target, rep int) error {
	p := filepath.Join(t.Dir, "open.dat")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		return err
	}
	out, err := b.worker(t.Dir, "open", p, strconv.Itoa(b.latN))
	if err != nil {
		return err
	}
	l, err := parseLat(out)
	if err != nil {
		return err
	}
	if l.Errors > 0 {
		return fmt.Errorf("plain open on %s failed: %s", t.Name, l.Errno)
	}
	b.res.add("open-p50", t.Name, l.P50us)
	if t.Name != tAerfs {
		return nil
	}
	out, err = b.inSession("WEB", fmt.Sprintf("bench-web-%d-%d", os.Getpid(), rep),
		"open", filepath.Join(t.Root, "SOUL.md"), strconv.Itoa(b.latN))
	if err != nil {
		return err
	}
	if l, err = parseLat(out); err != nil {
		return err
	}
	if l.Errors != l.N {
		return fmt.Errorf("refused open: %d of %d opens of SOUL.md by a WEB session succeeded", l.N-l.Errors, l.N)
	}
	b.res.add("refused-p50", t.Name, l.P50us)
	return nil
}

// wlRTT measures what one FUSE request and its reply cost, three ways: as
// the scheduler places the caller and the server, with both on one CPU,
// and with each on its own CPU. Every uncached metadata operation is a
// sequence of such round trips, so this row is the floor under the
// metadata rows (docs/performance.md, "Where metadata time goes").
func (b *bench) wlRTT(t *target, rep int) error {
	p := filepath.Join(t.Dir, "rtt.dat")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		return err
	}
	n := strconv.Itoa(b.latN * 10)
	measure := func(key string, args ...string) error {
		out, _, err := b.run(t.Dir, args[0], args[1:]...)
		if err != nil {
			return err
		}
		l, err := parseLat(out)
		if err != nil {
			return err
		}
		b.res.add(key, t.Name, l.P50us)
		return nil
	}
	if err := measure("rtt", b.self, workerArg, "xattr", p, n); err != nil {
		return err
	}
	if runtime.NumCPU() < 2 {
		return nil
	}
	for _, v := range []struct {
		key    string
		server int
	}{{"rtt-same", 0}, {"rtt-cross", 1}} {
		restore := func() {}
		if t.Name != tNative { // native has no server to place
			if t.PID == 0 {
				return fmt.Errorf("%s: the FUSE server's pid is not known; cannot place it on a CPU", t.Name)
			}
			var err error
			if restore, err = pinProcess(t.PID, v.server); err != nil {
				return fmt.Errorf("pinning the server of %s: %w", t.Name, err)
			}
		}
		err := measure(v.key, "taskset", "-c", "0", b.self, workerArg, "xattr", p, n)
		restore()
		if err != nil {
			return err
		}
	}
	return nil
}

// pinProcess binds every thread of pid to one CPU and returns a function
// that gives each thread back the affinity it had. A thread started while
// pinned inherits the pin, so restore also covers threads it did not see.
func pinProcess(pid, cpu int) (restore func(), err error) {
	tids := func() []int {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		var out []int
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				out = append(out, tid)
			}
		}
		return out
	}
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &orig); err != nil {
		return nil, err
	}
	var one unix.CPUSet
	one.Set(cpu)
	for _, tid := range tids() {
		if err := unix.SchedSetaffinity(tid, &one); err != nil && err != unix.ESRCH {
			return nil, err
		}
	}
	return func() {
		for _, tid := range tids() {
			unix.SchedSetaffinity(tid, &orig)
		}
	}, nil
}
