package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// healWriter is a python3 program that rewrites one guarded file in a loop
// until $STOP exists, each time with content of its own, and prints one
// line per attempt: "ok N SHA" when close returned 0 (the change was
// acknowledged), "fail N SHA ERR" otherwise.
const healWriter = `
import hashlib, os, sys
path, tag, stop = sys.argv[1], sys.argv[2], sys.argv[3]
i = 0
while not os.path.exists(stop):
    i += 1
    data = ("%s write %d\n" % (tag, i)) * 40
    h = hashlib.sha256(data.encode()).hexdigest()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)
        print("ok", i, h, flush=True)
    except OSError as e:
        print("fail", i, h, e.errno, flush=True)
`

// The whole state directory lives on a small tmpfs, filled and freed twice
// while four writers rewrite guarded files. Without a remount, after each
// fill the log heals once space is back (guarded writes work again), and at
// the end every guarded file holds the content of its last recorded
// version; every acknowledged write has its record; no write whose close
// failed is ever published — not while mounted, and not by the next mount
// (which completes only what was acknowledged).
func TestHealStateDirFullTwiceFourWriters(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 4; i++ {
		files[fmt.Sprintf("memory/w%d.md", i)] = "start\n"
	}
	e := newEnv(t, files)
	orig := e.State + ".orig"
	if err := os.Rename(e.State, orig); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.State, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", e.State, "tmpfs", 0, "size=12m,mode=0700"); err != nil {
		t.Fatalf("tmpfs for the state directory: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(e.State, syscall.MNT_DETACH) })
	if out, err := exec.Command("cp", "-a", orig+"/.", e.State+"/").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	e.Mount()

	stop := filepath.Join(t.TempDir(), "stop")
	type writer struct {
		cmd *exec.Cmd
		out *os.File
	}
	var ws []writer
	outDir := t.TempDir()
	for i := 0; i < 4; i++ {
		of, err := os.Create(filepath.Join(outDir, fmt.Sprintf("w%d.out", i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("python3", "-c", healWriter, fmt.Sprintf("memory/w%d.md", i), fmt.Sprintf("w%d", i), stop)
		cmd.Dir = e.WS
		cmd.Stdout = of
		cmd.Stderr = of
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, writer{cmd, of})
	}
	stopped := false
	stopWriters := func() {
		if stopped {
			return
		}
		stopped = true
		os.WriteFile(stop, nil, 0o644)
		for _, w := range ws {
			w.cmd.Wait()
			w.out.Close()
		}
	}
	t.Cleanup(stopWriters)

	// acked counts the acknowledged writes so far, and failures the
	// refused ones.
	counts := func() (acked, failed int) {
		for i := 0; i < 4; i++ {
			b, _ := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("w%d.out", i)))
			acked += strings.Count(string(b), "ok ")
			failed += strings.Count(string(b), "fail ")
		}
		return
	}
	waitCounts := func(what string, cond func(acked, failed int) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if cond(counts()) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		a, f := counts()
		du, _ := exec.Command("sh", "-c", "du -a "+e.State+" | sort -n | tail -8; df "+e.State+"; grep -o '\"message\":\"[^\"]*' "+e.State+"/daemon.log | sort | uniq -c; sort "+e.State+"/daemon.stderr | uniq -c | sort -n | tail; tail -n 3 "+outDir+"/w0.out").CombinedOutput()
		t.Logf("state directory:\n%s", du)
		t.Fatalf("timed out waiting for %s (%d acknowledged, %d failed)", what, a, f)
	}
	fill := func() []string {
		var made []string
		buf := make([]byte, 64<<10)
		for _, size := range []int{64 << 10, 4 << 10, 512} {
			p := filepath.Join(e.State, fmt.Sprintf("fill-%d-%d", size, time.Now().UnixNano()))
			f, err := os.Create(p)
			if err != nil {
				break
			}
			made = append(made, p)
			for {
				if _, err := f.Write(buf[:size]); err != nil {
					break
				}
			}
			f.Close()
		}
		return made
	}

	waitCounts("writes before the fill", func(a, _ int) bool { return a >= 20 })
	for round := 1; round <= 2; round++ {
		_, f0 := counts()
		made := fill()
		// Keep it full while the writers fail (the log heals and fails
		// again as space comes and goes with each attempt).
		waitCounts(fmt.Sprintf("failures while full (round %d)", round), func(_, f int) bool { return f >= f0+8 })
		time.Sleep(300 * time.Millisecond)
		for _, p := range made {
			os.Remove(p)
		}
		a0, _ := counts()
		waitCounts(fmt.Sprintf("writes acknowledged again once space is back (round %d)", round), func(a, _ int) bool { return a >= a0+20 })
	}
	stopWriters()

	st := e.mustAerfs("status", "--workspace", e.WS)
	if !strings.Contains(st.Stdout, "log healthy") {
		t.Errorf("status after the space came back does not say the log is healthy:\n%s", st.Stdout)
	}
	checkHealed(t, e, outDir)

	// The next mount completes only acknowledged changes: still no
	// failed write published.
	os.Truncate(filepath.Join(e.State, "daemon.log"), 0)
	e.Unmount()
	e.Mount()
	checkHealed(t, e, outDir)
	expectOK(t, "verify", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	os.Truncate(filepath.Join(e.State, "daemon.log"), 0)
}

// checkHealed checks every writer's file against the log: its content is
// its last recorded version, every acknowledged write has a write record,
// and the content of a write whose close failed is not what the file holds.
func checkHealed(t *testing.T, e *Env, outDir string) {
	t.Helper()
	recorded := map[string]bool{} // path + hash of every write record
	for _, le := range e.Log() {
		if r := le.Record; r.Type == "write" && r.Payload != nil && r.Payload.NewHash != "" {
			recorded[r.Meta.Path+" "+r.Payload.NewHash] = true
		}
	}
	for i := 0; i < 4; i++ {
		rel := fmt.Sprintf("memory/w%d.md", i)
		cur := e.Hash(rel)
		var hist []struct {
			Hash string `json:"hash"`
		}
		h := e.mustAerfs("history", "--json", rel, "--workspace", e.WS)
		if err := json.Unmarshal([]byte(h.Stdout), &hist); err != nil || len(hist) == 0 {
			t.Fatalf("history %s: %v", rel, err)
		}
		if last := hist[len(hist)-1].Hash; last != cur {
			t.Errorf("%s holds %.12s, but its last recorded version is %.12s: content without its record", rel, cur, last)
		}
		f, err := os.Open(filepath.Join(outDir, fmt.Sprintf("w%d.out", i)))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		acked, failed := 0, 0
		for sc.Scan() {
			fl := strings.Fields(sc.Text())
			if len(fl) < 3 {
				continue
			}
			switch fl[0] {
			case "ok":
				acked++
				if !recorded[rel+" "+fl[2]] {
					t.Errorf("%s: acknowledged write %s has no write record", rel, fl[1])
				}
			case "fail":
				failed++
				if fl[2] == cur {
					t.Errorf("%s holds the content of write %s, whose close failed (%s)", rel, fl[1], strings.Join(fl[3:], " "))
				}
			}
		}
		f.Close()
		t.Logf("%s: %d writes acknowledged, %d failed", rel, acked, failed)
	}
}
