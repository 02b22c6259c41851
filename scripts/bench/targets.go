package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Target names, in table order.
const (
	tNative = "native"
	tLoop   = "loopback"
	tNoPT   = "loopback-nopt"
	tAerfs  = "aerfs"
	// tAerfsNoPT is aerfs mounted with --no-passthrough: plain data goes
	// through the daemon, as on an unprivileged mount.
	tAerfsNoPT = "aerfs-nopt"
)

var targetNames = []string{tNative, tLoop, tNoPT, tAerfs, tAerfsNoPT}

// target is one place the workloads run: Dir is a plain (unguarded)
// directory in it.
type target struct {
	Name string
	Root string // the mountpoint (or the native directory)
	Dir  string // Root/work: where the plain workloads run
	PID  int    // FUSE server pid, 0 for native
	// State is an aerfs target's state directory ("" for the others).
	State string
}

// cleanups are run once, in reverse order, on every way out: normal end,
// error, panic, SIGINT/SIGTERM.
var (
	cleanupMu sync.Mutex
	cleanups  []func()
	cleaned   bool
)

func atExit(f func()) {
	cleanupMu.Lock()
	cleanups = append(cleanups, f)
	cleanupMu.Unlock()
}

func runCleanups() {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	if cleaned {
		return
	}
	cleaned = true
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

func mounted(mp string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == mp {
			return true
		}
	}
	return false
}

// forceUnmount is the last resort when a server did not unmount itself.
func forceUnmount(mp string) {
	for i := 0; i < 20 && mounted(mp); i++ {
		if syscall.Unmount(mp, 0) == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if mounted(mp) {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

func setupNative(base string) (*target, error) {
	root := filepath.Join(base, "native")
	t := &target{Name: tNative, Root: root, Dir: filepath.Join(root, "work")}
	return t, os.MkdirAll(t.Dir, 0o755)
}

// setupLoopback starts bin/aerfs-loopback over base/<name>-backing.
func setupLoopback(base, bin, name string, passthrough bool) (*target, error) {
	back := filepath.Join(base, name+"-backing")
	mp := filepath.Join(base, name)
	for _, d := range []string{filepath.Join(back, "work"), mp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, "-passthrough="+strconv.FormatBool(passthrough), back, mp)
	// Its own process group: a Ctrl-C reaches the driver, which unmounts
	// after the workload stopped, not the server under a running workload.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	atExit(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		forceUnmount(mp)
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		return nil, fmt.Errorf("%s: loopback helper did not report ready", name)
	}
	return &target{Name: name, Root: mp, Dir: filepath.Join(mp, "work"), PID: cmd.Process.Pid}, nil
}

var daemonPID = regexp.MustCompile(`daemon pid (\d+)`)

// setupAerfs initialises and mounts aerfs over base/<dir>, with the guarded
// files the guarded workloads use; flags go to aerfs mount.
func setupAerfs(base, bin, name, dir string, flags ...string) (*target, error) {
	ws := filepath.Join(base, dir)
	state := filepath.Join(base, dir+"-state")
	if err := os.MkdirAll(filepath.Join(ws, "work"), 0o755); err != nil {
		return nil, err
	}
	for name, content := range map[string]string{
		"MEMORY.md": "# memory\n",
		"SOUL.md":   "# soul\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command(bin, "init", "--state", state, ws).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("aerfs init: %v: %s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"mount", "--state", state, ws}, flags...)...)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	// Register the unmount whatever happened: a half-started mount is
	// still a mount.
	pid := 0
	if m := daemonPID.FindSubmatch(out); m != nil {
		pid, _ = strconv.Atoi(string(m[1]))
	}
	atExit(func() {
		if mounted(ws) {
			if o, err := exec.Command(bin, "unmount", ws).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "aerfs-bench: aerfs unmount: %v: %s", err, o)
			}
		}
		forceUnmount(ws)
		if pid > 0 {
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(50 * time.Millisecond)
			}
			if syscall.Kill(pid, 0) == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("aerfs mount: %v: %s", err, out)
	}
	return &target{Name: name, Root: ws, Dir: filepath.Join(ws, "work"), PID: pid, State: state}, nil
}

// rssKiB reads a process's resident and peak memory.
func rssKiB(pid int) (rss, hwm int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(f[1])
		case "VmHWM:":
			hwm, _ = strconv.Atoi(f[1])
		}
	}
	return rss, hwm
}
