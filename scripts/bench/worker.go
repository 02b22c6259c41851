package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The workers are the bench binary re-executed with "__worker": every
// workload runs in a process of its own, apart from the FUSE servers and
// from the driver (which must not read labelled files itself), and the
// guarded ones can be started inside an aerfs session with `aerfs run`.

const workerArg = "__worker"

func workerMain(args []string) {
	if len(args) < 1 {
		fatalf("worker: missing mode")
	}
	var out any
	var err error
	switch args[0] {
	case "meta":
		out, err = workerMeta(args[1], atoi(args[2]))
	case "mktree":
		err = workerMktree(args[1], atoi(args[2]))
	case "commit":
		out, err = workerCommit(args[1], atoi(args[2]), args[3] == "fsync")
	case "open":
		out, err = workerOpen(args[1], atoi(args[2]))
	case "xattr":
		out, err = workerXattr(args[1], atoi(args[2]))
	case "net":
		out, err = workerNet(args[1], atoi(args[2]))
	default:
		err = fmt.Errorf("unknown worker mode %q", args[0])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "aerfs-bench worker %s: %v\n", args[0], err)
		os.Exit(1)
	}
	if out != nil {
		json.NewEncoder(os.Stdout).Encode(out)
	}
	os.Exit(0)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fatalf("worker: bad number %q", s)
	}
	return n
}

// MetaResult is the wall time of each phase of the metadata loop.
type MetaResult struct {
	Create, Stat, Unlink float64 // seconds
}

// workerMeta creates n small files in dir, stats them, unlinks them.
func workerMeta(dir string, n int) (*MetaResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = filepath.Join(dir, fmt.Sprintf("f%06d", i))
	}
	data := make([]byte, 100)
	var r MetaResult
	t := time.Now()
	for _, p := range names {
		fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", p, err)
		}
		if _, err := syscall.Write(fd, data); err != nil {
			return nil, err
		}
		syscall.Close(fd)
	}
	r.Create = time.Since(t).Seconds()
	var st syscall.Stat_t
	t = time.Now()
	for _, p := range names {
		if err := syscall.Lstat(p, &st); err != nil {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
	}
	r.Stat = time.Since(t).Seconds()
	t = time.Now()
	for _, p := range names {
		if err := syscall.Unlink(p); err != nil {
			return nil, fmt.Errorf("unlink %s: %w", p, err)
		}
	}
	r.Unlink = time.Since(t).Seconds()
	return &r, nil
}

// workerMktree makes a tree of n entries under dir: 100 directories of
// small files.
func workerMktree(dir string, n int) error {
	const dirs = 100
	per := n/dirs - 1
	data := []byte("aerfs bench tree entry\n")
	for d := 0; d < dirs; d++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		for i := 0; i < per; i++ {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.txt", i)), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// LatResult summarises a latency loop.
type LatResult struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	Errno  string  `json:"errno,omitempty"`
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	OpsSec float64 `json:"ops_per_s"`
}

func summarise(lat []time.Duration, total time.Duration, errs int, errno string) *LatResult {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return &LatResult{N: len(lat), Errors: errs, Errno: errno,
		P50us: us(percentile(lat, 50)), P99us: us(percentile(lat, 99)),
		OpsSec: float64(len(lat)) / total.Seconds()}
}

// workerCommit times open(O_WRONLY|O_TRUNC)–write 4 KiB–[fsync]–close of
// path, n times after a short warm-up. Each write differs, so a store that
// deduplicates content still stores every version.
func workerCommit(path string, n int, doFsync bool) (*LatResult, error) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	one := func(i int) error {
		copy(buf, fmt.Sprintf("version %09d\n", i))
		fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CREAT|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		if _, err := syscall.Write(fd, buf); err != nil {
			syscall.Close(fd)
			return fmt.Errorf("write %s: %w", path, err)
		}
		if doFsync {
			if err := syscall.Fsync(fd); err != nil {
				syscall.Close(fd)
				return fmt.Errorf("fsync %s: %w", path, err)
			}
		}
		if err := syscall.Close(fd); err != nil {
			return fmt.Errorf("close %s: %w", path, err)
		}
		return nil
	}
	seq := int(time.Now().UnixNano() % 1e6 * 1000)
	for i := 0; i < 5; i++ {
		if err := one(seq + i); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := one(seq + 5 + i); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return summarise(lat, time.Since(start), 0, ""), nil
}

// workerOpen times open(O_WRONLY) of path n times; an open that succeeds
// is closed outside the timed span. Refusals are counted, not fatal.
func workerOpen(path string, n int) (*LatResult, error) {
	lat := make([]time.Duration, 0, n)
	errs := 0
	errno := ""
	start := time.Now()
	var spent time.Duration
	for i := 0; i < n+5; i++ {
		t := time.Now()
		fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
		d := time.Since(t)
		if i >= 5 {
			lat = append(lat, d)
			spent += d
		}
		if err != nil {
			if i >= 5 {
				errs++
			}
			errno = err.(syscall.Errno).Error()
			continue
		}
		syscall.Close(fd)
	}
	_ = start
	return summarise(lat, spent, errs, errno), nil
}

// workerXattr times n getxattr calls of an attribute path does not have.
// The kernel caches no answer for a user.* attribute, so on a FUSE mount
// each call is exactly one request and its reply: the round trip every
// uncached operation pays.
func workerXattr(path string, n int) (*LatResult, error) {
	buf := make([]byte, 64)
	lat := make([]time.Duration, 0, n)
	var spent time.Duration
	for i := 0; i < n+20; i++ {
		t := time.Now()
		_, err := unix.Getxattr(path, "user.aerfs-bench-absent", buf)
		d := time.Since(t)
		if err != unix.ENODATA {
			return nil, fmt.Errorf("getxattr %s: want ENODATA, got %v", path, err)
		}
		if i >= 20 {
			lat = append(lat, d)
			spent += d
		}
	}
	return summarise(lat, spent, 0, ""), nil
}
