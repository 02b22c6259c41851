package main

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
)

// Report is the JSON document of one run.
type Report struct {
	Date          string   `json:"date"`
	Machine       Machine  `json:"machine"`
	Quick         bool     `json:"quick"`
	Runs          int      `json:"runs"`
	Sizes         Sizes    `json:"sizes"`
	Rows          []*Row   `json:"rows"`
	Micro         []*Micro `json:"micro"`
	Checks        []Check  `json:"issue5_checks"`
	DaemonRSSKiB  int      `json:"aerfs_daemon_rss_kib"`
	DaemonPeakKiB int      `json:"aerfs_daemon_peak_rss_kib"`
	ElapsedS      float64  `json:"elapsed_s"`
}

type Sizes struct {
	FioFile     string `json:"fio_file"`
	MetaFiles   int    `json:"meta_files"`
	TreeEntries int    `json:"tree_entries"`
	LatencyOps  int    `json:"latency_ops_per_run"`
	SourceTree  string `json:"source_tarball"`
}

type Machine struct {
	Host       string `json:"host"`
	CPU        string `json:"cpu"`
	NProc      int    `json:"nproc"`
	MemMiB     int    `json:"mem_mib"`
	Kernel     string `json:"kernel"`
	Filesystem string `json:"filesystem"`
	Go         string `json:"go"`
	Fio        string `json:"fio"`
	// The load average before and after the run: other work on the
	// machine shows up as noise in every column.
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func machineInfo(dir string) Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version()}
	m.Host, _ = os.Hostname()
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = cstr(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		m.MemMiB = kb / 1024
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPU = strings.TrimSpace(l[strings.Index(l, ":")+1:])
				break
			}
		}
	}
	m.Filesystem = fsOf(dir)
	m.LoadStart = loadavg()
	if out, err := exec.Command("fio", "--version").Output(); err == nil {
		m.Fio = strings.TrimSpace(string(out))
	}
	return m
}

func cstr(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// fsOf names the filesystem holding dir: type, device and mount point.
func fsOf(dir string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "unknown"
	}
	best, desc := "", "unknown"
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		mp := f[4]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			sep := 6
			for sep < len(f) && f[sep] != "-" {
				sep++
			}
			if sep+2 < len(f) {
				best, desc = mp, fmt.Sprintf("%s on %s (mounted at %s)", f[sep+1], f[sep+2], mp)
			}
		}
	}
	return desc
}

// Micro is one Go benchmark, over repeated runs.
type Micro struct {
	Package  string  `json:"package"`
	Name     string  `json:"name"`
	NsOp     *Stat   `json:"ns_per_op"`
	AllocsOp float64 `json:"allocs_per_op"`
	BytesOp  float64 `json:"bytes_per_op"`
	// Metrics the benchmark reports itself (b.ReportMetric), by unit:
	// the worst run's value, e.g. the label store's "MiB/100k".
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op((?:\s+[\d.]+ \S+)*)`)

// benchMetric is one "value unit" pair after ns/op.
var benchMetric = regexp.MustCompile(`([\d.]+) (\S+)`)

// runMicro runs the Go benchmarks of the pure packages.
func runMicro(runs int, quick bool) ([]*Micro, error) {
	args := []string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", strconv.Itoa(runs)}
	if quick {
		args = append(args, "-benchtime", "200ms")
	}
	var pkgs []string
	for _, p := range []string{"./policy/", "./principal/", "./evidence/", "./guard/", "./guard/label/"} {
		if _, err := os.Stat(p); err == nil {
			pkgs = append(pkgs, p)
		}
	}
	fmt.Fprintf(os.Stderr, "  go %s\n", strings.Join(append(args, pkgs...), " "))
	cmd := exec.Command("go", append(args, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %v: %s%s", err, lastLines(string(out)), lastLines(stderr.String()))
	}
	type acc struct {
		m  *Micro
		ns []float64
	}
	byKey := map[string]*acc{}
	var order []string
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if p, ok := strings.CutPrefix(l, "pkg: "); ok {
			pkg = p
			continue
		}
		m := benchLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		k := pkg + " " + m[1]
		a := byKey[k]
		if a == nil {
			a = &acc{m: &Micro{Package: pkg, Name: m[1]}}
			byKey[k] = a
			order = append(order, k)
		}
		ns, _ := strconv.ParseFloat(m[2], 64)
		a.ns = append(a.ns, ns)
		for _, pm := range benchMetric.FindAllStringSubmatch(m[3], -1) {
			v, _ := strconv.ParseFloat(pm[1], 64)
			switch pm[2] {
			case "B/op":
				a.m.BytesOp = math.Max(a.m.BytesOp, v)
			case "allocs/op":
				a.m.AllocsOp = math.Max(a.m.AllocsOp, v)
			default:
				if a.m.Metrics == nil {
					a.m.Metrics = map[string]float64{}
				}
				a.m.Metrics[pm[2]] = math.Max(a.m.Metrics[pm[2]], v)
			}
		}
	}
	var res []*Micro
	for _, k := range order {
		a := byKey[k]
		a.m.NsOp = newStat(a.ns)
		res = append(res, a.m)
	}
	return res, nil
}

// Check is one target, met or missed.
type Check struct {
	Target string  `json:"target"`
	Figure string  `json:"figure"`
	Value  float64 `json:"value"`
	Need   string  `json:"need"`
	Met    bool    `json:"met"`
}

func checks(rows []*Row, micro []*Micro) []Check {
	byKey := map[string]*Row{}
	for _, r := range rows {
		byKey[r.Key] = r
	}
	var cs []Check
	add := func(target, key, ratio string, min float64) {
		r := byKey[key]
		if r == nil {
			return
		}
		v, ok := r.Speed[ratio]
		if !ok {
			return
		}
		cs = append(cs, Check{Target: target, Figure: r.Name + " [" + r.Cache + "] " + ratio, Value: v,
			Need: fmt.Sprintf("≥ %.2f×", min), Met: v >= min})
	}
	add("plain seq read ≥ 0.95× native", "seqread", "aerfs/native", 0.95)
	add("plain seq write ≥ 0.95× native", "seqwrite", "aerfs/native", 0.95)
	add("plain random 4 KiB write ≥ 0.8× native", "randwrite", "aerfs/native", 0.8)
	for _, k := range []string{"seqwrite", "seqread", "seqread-cold", "randwrite", "randread"} {
		add("plain I/O ≥ 1.0× loopback", k, "aerfs/loopback", 1.0)
	}
	for _, k := range []string{"create", "stat", "unlink", "lsR", "lsR-again", "lsR-cold", "du", "untar", "gitstatus", "gitstatus-again"} {
		add("metadata ≥ 2× loopback", k, "aerfs/loopback", 2.0)
	}
	for _, k := range []string{"lsR", "lsR-again", "lsR-cold", "du", "gitstatus", "gitstatus-again"} {
		add("stat-heavy ≥ 0.5× native", k, "aerfs/native", 0.5)
	}
	// Not a target of the issue: what aerfs adds when the kernel cannot
	// pass plain data through (an unprivileged mount).
	for _, k := range []string{"seqwrite", "seqread", "seqread-cold", "randwrite", "randread"} {
		add("rootless (no passthrough): plain I/O ≥ 1.0× loopback-nopt", k, "aerfs-nopt/loopback-nopt", 1.0)
	}
	// A session's proxy against a direct connection in the same run.
	add("proxy throughput ≥ 0.9× direct", "proxy-tunnel", "aerfs/native", 0.9)
	add("proxy throughput ≥ 0.9× direct", "proxy-plain", "aerfs/native", 0.9)
	add("proxy throughput ≥ 0.9× direct", "proxy-paced", "aerfs/native", 0.9)
	if r := byKey["proxy-conn-added"]; r != nil && r.Stats[tAerfs] != nil {
		v := r.Stats[tAerfs].Median
		cs = append(cs, Check{Target: "proxy adds ≤ 1 ms per connection", Figure: r.Name + " (ms)", Value: v, Need: "≤ 1 ms", Met: v <= 1})
	}
	// p50 ≤ 3× the loopback's, i.e. a speed of at least 1/3.
	add("guarded commit p50 ≤ 3× loopback fsync commit (speed ≥ 0.33×)", "guarded-p50", "aerfs/loopback", 1.0/3)
	add("refused open p50 ≤ 2× loopback open (speed ≥ 0.5×)", "refused-p50", "aerfs/loopback", 0.5)
	// Metadata at the transport's cost and a guarded commit of one flush
	// (docs/performance.md, "Where a create's time goes").
	add("create ≥ 1.0× loopback", "create", "aerfs/loopback", 1.0)
	add("stat after create ≥ 1.2× loopback", "stat", "aerfs/loopback", 1.2)
	add("unlink ≥ 1.0× loopback", "unlink", "aerfs/loopback", 1.0)
	add("create+stat+unlink ≥ 1.0× loopback", "meta-bar", "aerfs/loopback", 1.0)
	add("guarded commit p50 ≤ 1.5× loopback fsync commit (speed ≥ 0.67×)", "guarded-p50", "aerfs/loopback", 1/1.5)
	add("8 writers: guarded commit p50 ≤ 2× loopback (speed ≥ 0.5×)", "guarded8-p50", "aerfs/loopback", 0.5)
	for _, m := range micro {
		if strings.HasSuffix(m.Package, "/policy") && strings.HasPrefix(m.Name, "BenchmarkDecide") && m.NsOp != nil {
			cs = append(cs, Check{Target: "decision ≤ 1 µs, 0 allocs", Figure: m.Name + " ns/op (allocs " + strconv.FormatFloat(m.AllocsOp, 'f', -1, 64) + ")",
				Value: m.NsOp.Median, Need: "≤ 1000 ns, 0 allocs", Met: m.NsOp.Median <= 1000 && m.AllocsOp == 0})
		}
	}
	return cs
}

// num formats a figure with three significant digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func cell(s *Stat) string {
	if s == nil {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
}

func ratio(v float64, ok ...bool) string {
	if math.IsNaN(v) || len(ok) > 0 && !ok[0] {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "×"
}

// Text renders the report as Markdown tables.
func (r *Report) Text() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "\naerfs benchmark, %s — %s\n", r.Date, map[bool]string{true: "QUICK (sizes reduced; not a measurement)", false: "full"}[r.Quick])
	fmt.Fprintf(&b, "machine: %s, %d CPUs (%s), %d MiB RAM, Linux %s, backing fs %s, %s, %s\n",
		m.Host, m.NProc, m.CPU, m.MemMiB, m.Kernel, m.Filesystem, m.Go, m.Fio)
	fmt.Fprintf(&b, "load average (1/5/15 min): %s at start, %s at end\n", m.LoadStart, m.LoadEnd)
	fmt.Fprintf(&b, "sizes: fio file %s, %d small files, %d-entry tree, %d ops per latency run, source tree %s; %d runs each\n\n",
		r.Sizes.FioFile, r.Sizes.MetaFiles, r.Sizes.TreeEntries, r.Sizes.LatencyOps, filepath.Base(r.Sizes.SourceTree), r.Runs)
	b.WriteString("Cells: median (min–max). Ratio columns are speed: above 1× means the first target is faster.\n")
	b.WriteString("For throughput (MiB/s, IOPS, ops/s) speed = a ÷ b; for time and latency (s, µs) speed = b_time ÷ a_time.\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| workload\t unit\t cache\t native\t loopback\t loopback-nopt\t aerfs\t aerfs-nopt\t aerfs vs native\t aerfs vs loopback\t nopt vs native\t aerfs-nopt vs native\t aerfs-nopt vs loopback-nopt\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, row := range r.Rows {
		if len(row.Stats) == 0 {
			continue
		}
		fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t\n", row.Name, row.Unit, row.Cache,
			cell(row.Stats[tNative]), cell(row.Stats[tLoop]), cell(row.Stats[tNoPT]), cell(row.Stats[tAerfs]), cell(row.Stats[tAerfsNoPT]),
			sp(row, "aerfs/native"), sp(row, "aerfs/loopback"), sp(row, "loopback-nopt/native"),
			sp(row, "aerfs-nopt/native"), sp(row, "aerfs-nopt/loopback-nopt"))
	}
	tw.Flush()
	b.WriteString("\nGuarded rows: the aerfs column is the guarded operation (commit of MEMORY.md by a USER session;\n")
	b.WriteString("refused open of SOUL.md by a WEB session); the other columns are the plain fsync loop / plain open.\n")
	if r.DaemonRSSKiB > 0 {
		fmt.Fprintf(&b, "aerfs daemon memory after the run: RSS %d KiB, peak %d KiB\n", r.DaemonRSSKiB, r.DaemonPeakKiB)
	}
	for _, mi := range r.Micro {
		if v, ok := mi.Metrics["MiB/100k"]; ok {
			fmt.Fprintf(&b, "label store with 100,000 labelled files: %s MiB of heap (%s)\n", num(v), mi.Name)
		}
	}
	if len(r.Micro) > 0 {
		b.WriteString("\nGo microbenchmarks (ns/op median (min–max) over runs; B/op, allocs/op and reported metrics, worst run)\n\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.Debug)
		fmt.Fprintln(tw, "| package\t benchmark\t ns/op\t B/op\t allocs/op\t other\t")
		fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t")
		ms := append([]*Micro(nil), r.Micro...)
		sort.SliceStable(ms, func(i, j int) bool { return ms[i].Package < ms[j].Package })
		for _, mi := range ms {
			var other []string
			for _, u := range slices.Sorted(maps.Keys(mi.Metrics)) {
				other = append(other, num(mi.Metrics[u])+" "+u)
			}
			fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t\n", strings.TrimPrefix(mi.Package, "github.com/aerfs/aerfs/"), mi.Name,
				cell(mi.NsOp), num(mi.BytesOp), num(mi.AllocsOp), strings.Join(other, ", "))
		}
		tw.Flush()
	}
	if len(r.Checks) > 0 {
		b.WriteString("\nTargets\n\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.Debug)
		fmt.Fprintln(tw, "| target\t figure\t value\t need\t met\t")
		fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t")
		for _, c := range r.Checks {
			v := ratio(c.Value)
			if strings.HasPrefix(c.Target, "decision") {
				v = num(c.Value) + " ns"
			}
			fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t\n", c.Target, c.Figure, v, c.Need, map[bool]string{true: "yes", false: "**MISS**"}[c.Met])
		}
		tw.Flush()
	}
	return b.String()
}

func sp(r *Row, k string) string {
	v, ok := r.Speed[k]
	return ratio(v, ok)
}
