package integration

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Minimal reproductions of defects the broader suites found, one subtest
// each, so that a fix shows up as exactly one test turning green.

func TestRegressions(t *testing.T) {
	e := newEnv(t, map[string]string{
		"MEMORY.md":    "orig line one\norig line two\n",
		"AGENTS.md":    "agents\n",
		"CLAUDE.md":    "claude\n",
		"TOOLS.md":     "tools\n",
		"HEARTBEAT.md": "beat\n",
	}).Mount()

	t.Run("user-overwrite-truncates", func(t *testing.T) {
		// open(O_WRONLY|O_TRUNC) from a USER session must start from empty.
		expectOK(t, "overwrite", e.ShT("USER", "rg-trunc", `printf 'new\n' > MEMORY.md`))
		if got := e.Read("MEMORY.md"); got != "new\n" {
			bugf(t, "after `printf 'new\\n' > MEMORY.md` in a USER session, MEMORY.md = %q, want \"new\\n\"", got)
		}
	})

	t.Run("replaced-file-inode-not-reused", func(t *testing.T) {
		// A commit replaces the backing file; the old inode number must not
		// stay attached to the name, or the next new file shares it.
		r := e.ShT("USER", "rg-ino", `printf 'a\n' >> CLAUDE.md && printf 'c\n' > rg-n && stat -c %i CLAUDE.md rg-n && cp rg-n CLAUDE.md`)
		if r.Code != 0 {
			bugf(t, "cp of a new file over CLAUDE.md after a commit: %s", r)
		}
		if got := e.Read("CLAUDE.md"); got != "c\n" {
			bugf(t, "CLAUDE.md = %q, want \"c\\n\"", got)
		}
	})

	t.Run("stale-label-on-reused-inode", func(t *testing.T) {
		// A clean USER session's own new files must never look like
		// drifted EXTERNAL content.
		r := e.ShT("USER", "rg-label", `for i in 1 2 3 4 5 6 7 8; do printf 'c%s\n' $i > rg-l$i && mv rg-l$i AGENTS.md || echo "REFUSED $i"; done`)
		if strings.Contains(r.Stdout, "REFUSED") || r.Code != 0 {
			bugf(t, "a clean USER session could not move its own new file onto AGENTS.md: %s", r)
		}
		if got := e.Read("AGENTS.md"); got != "c8\n" {
			bugf(t, "AGENTS.md = %q, want \"c8\\n\"", got)
		}
		for _, le := range e.Log() {
			if le.Record.Meta.Rule == "drift" && strings.HasPrefix(le.Record.Meta.Path, "rg-l") {
				bugf(t, "a file the session just wrote was reported as drift: %s", le.Record.Meta.Path)
			}
		}
	})

	t.Run("write-through-hard-link", func(t *testing.T) {
		r := e.ShT("USER", "rg-link", `ln TOOLS.md rg-hl && printf 'more\n' >> rg-hl`)
		expectOK(t, "write through the link", r)
		if got := e.Read("TOOLS.md"); got != "tools\nmore\n" {
			bugf(t, "TOOLS.md = %q after writing through its hard link, want \"tools\\nmore\\n\"", got)
		}
		if r := e.Owner(`ls -i TOOLS.md rg-hl | awk '{print $1}' | uniq | wc -l`); strings.TrimSpace(r.Stdout) != "1" {
			bugf(t, "TOOLS.md and rg-hl are no longer one inode after the write: %s", e.Owner("ls -li TOOLS.md rg-hl"))
		}
	})

	t.Run("cross-session-stat", func(t *testing.T) {
		expectOK(t, "owner makes sessions/", e.Owner("mkdir -p sessions"))
		expectOK(t, "session a", e.ShT("WEB", "rga", `mkdir -p sessions/rga && echo s > sessions/rga/secret.txt && stat sessions/rga/secret.txt >/dev/null`))
		r := e.ShT("WEB", "rgb", `stat -c '%n %s' sessions/rga/secret.txt; test -e sessions/rga && echo DIR-VISIBLE`)
		if r.Code == 0 || strings.Contains(r.Stdout, "secret.txt") || strings.Contains(r.Stdout, "DIR-VISIBLE") {
			bugf(t, "session rgb can stat session rga's file: %s", r)
		}
	})

	t.Run("xattrs-survive-commit", func(t *testing.T) {
		expectOK(t, "owner sets an xattr", e.OwnerT(`$PY $OPS setxattr HEARTBEAT.md user.note kept`))
		expectOK(t, "USER appends", e.ShT("USER", "rg-xattr", `printf 'beat\n' >> HEARTBEAT.md`))
		if r := e.OwnerT(`$PY $OPS getxattr HEARTBEAT.md user.note`); r.Stdout != "kept" {
			bugf(t, "a committed write dropped the user.note xattr of HEARTBEAT.md: %s", r)
		}
	})
}

// A FIFO that reuses the inode number of a replaced guarded file must not
// hang the daemon (it opens labelled files to hash them). Its own mount:
// when the bug is present the daemon is stuck.
func TestFifoOnReusedInodeDoesNotHang(t *testing.T) {
	e := newEnv(t, map[string]string{"AGENTS.md": "agents\n"}).Mount()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, aerfsBin, "run", "--workspace", e.WS, "--principal", "USER", "--session", "rg-fifo", "--",
		"sh", "-c", `for i in 1 2 3 4 5 6 7 8; do printf 'c\n' > n$i && mv n$i AGENTS.md && mkfifo fifo$i && rm fifo$i || exit 1; done`)
	cmd.Dir = e.WS
	cmd.Env = os.Environ()
	cmd.WaitDelay = 3 * time.Second
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Free the stuck request if fusectl is there, and detach the mount
		// so that the hung daemon does not hold up the rest of the package.
		abortFuse(t, e.WS)
		syscall.Unmount(e.WS, syscall.MNT_DETACH)
		err = <-done
	}
	out := buf.String()
	if ctx.Err() != nil {
		bugf(t, "mkfifo/rm after replacing AGENTS.md hung the daemon for 15s (it hashes a FIFO that inherited a stale label): %s", out)
	}
	if err != nil {
		bugf(t, "mkfifo/rm after replacing AGENTS.md: %v: %s", err, out)
	}
}

// abortFuse aborts the FUSE connection of the mount at mp, which fails
// every pending request of a hung daemon.
func abortFuse(t *testing.T, mp string) {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == mp {
			minor := f[2][strings.Index(f[2], ":")+1:]
			_ = os.WriteFile("/sys/fs/fuse/connections/"+minor+"/abort", []byte("1"), 0o200)
		}
	}
}

// Staged content lives in memory while it is small and moves to disk when a
// write takes it past the in-memory limit; either way the commit is byte
// exact, for writes in order, a seek back into the moved part, and an
// append to a file already past the limit.
func TestLargeGuardedWriteStagedToDisk(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n"}).Mount()
	py := `import hashlib, os
chunk = bytes(range(256)) * 4096          # 1 MiB
with open("MEMORY.md", "wb") as f:
    for i in range(20):
        f.write(bytes([i]) + chunk[1:])
    f.seek(5)
    f.write(b"PATCHED")
with open("MEMORY.md", "ab") as f:
    f.write(b"tail\n")
data = bytearray()
for i in range(20):
    data += bytes([i]) + chunk[1:]
data[5:12] = b"PATCHED"
data += b"tail\n"
print(len(data), hashlib.sha256(data).hexdigest())
`
	r := e.Run("USER", "big", "python3", "-c", py)
	expectOK(t, "large write", r)
	got := runCmd(e.WS, nil, "sh", "-c", "wc -c < MEMORY.md; sha256sum MEMORY.md | cut -d' ' -f1")
	want := strings.Fields(r.Stdout)
	have := strings.Fields(got.Stdout)
	if len(want) != 2 || len(have) != 2 || want[0] != have[0] || want[1] != have[1] {
		t.Fatalf("MEMORY.md after a 20 MiB write: got %q, want %q", got.Stdout, r.Stdout)
	}
	// Where the staging lived: the daemon's descriptors while a handle
	// is open, first with a little content, then past the limit.
	probe := `import os, sys
pid = sys.argv[1]
def staging():
    kinds = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if "aerfs-stage" in target:
            kinds.add("memory")
        elif "/staging/stage-" in target:
            kinds.add("disk")
    return ",".join(sorted(kinds))
with open("MEMORY.md", "wb") as f:
    f.write(b"x" * 1024)
    f.flush()
    print(staging())
    for i in range(20):
        f.write(b"y" * (1 << 20))
    f.flush()
    print(staging())
`
	// The owner looks (a confined session may not read the daemon's
	// descriptors, which is the point of confinement).
	pr := runCmd(e.WS, nil, "python3", "-c", probe, strconv.Itoa(daemonPid(t, e)))
	expectOK(t, "staging probe", pr)
	if pr.Stdout != "memory\ndisk\n" {
		t.Fatalf("staging while open: got %q, want in memory at 1 KiB and on disk past 16 MiB", pr.Stdout)
	}
}
