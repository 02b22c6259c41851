package integration

// The owner's commands that read a root daemon's state directory (log,
// history, pending, verify, export, report, watch …) are run by the daemon
// for the owner's channel, confined to reading (daemon/ownerread.go).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerfs/aerfs/configs"
	"github.com/aerfs/aerfs/daemon"
)

func TestOwnerReadsThroughTheDaemon(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n", "MEMORY.md": "# memory\n"})
	if r := s.asOwner("sh", "-c", "echo 'owner line' >> MEMORY.md && echo 'second line' >> MEMORY.md"); r.Code != 0 {
		t.Fatalf("owner's append: %s", r)
	}
	if r := s.session("WEB", "web-r", "echo poisoned >> MEMORY.md"); r.Code == 0 {
		t.Fatalf("a WEB session's append to MEMORY.md was not refused: %s", r)
	}
	home := s.home
	out := filepath.Join(home, "owner-read-"+filepath.Base(s.WS))
	os.MkdirAll(out, 0o755)
	os.Chown(out, s.uid, s.gid)
	t.Cleanup(func() { os.RemoveAll(out) })

	checks := []struct {
		name string
		argv []string
		code int
		want string
	}{
		{"log", []string{"log", "--path", "MEMORY.md"}, 0, "MEMORY.md"},
		{"log --json", []string{"log", "--json", "--refused"}, 0, `"verdict":"deny"`},
		{"history (relative path, from the workspace)", []string{"history", "MEMORY.md"}, 0, "USER"},
		{"diff", []string{"diff", "MEMORY.md", "--from", "1"}, 0, "+second line"},
		{"pending", []string{"pending"}, 0, ""},
		{"snapshot list", []string{"snapshot", "list"}, 0, ""},
		{"key", []string{"key"}, 0, ""},
		{"verify --state", []string{"verify"}, 0, "verified " + s.State},
		{"export to a directory", []string{"export", "-o", filepath.Join(out, "bundle")}, 0, "exported " + filepath.Join(out, "bundle")},
		{"export to a zip", []string{"export", "--output=" + filepath.Join(out, "bundle.zip")}, 0, "exported " + filepath.Join(out, "bundle.zip")},
		{"report", []string{"report", "-o", filepath.Join(out, "report.html")}, 0, "wrote"},
	}
	for _, c := range checks {
		r := s.asOwner(append([]string{aerfsBin}, c.argv...)...)
		if r.Code != c.code || !strings.Contains(r.Stdout+r.Stderr, c.want) || strings.Contains(r.Stderr, "sudo") {
			t.Errorf("owner's aerfs %s: want exit %d and %q: %s", c.name, c.code, c.want, r)
		}
	}
	// What the owner got is theirs, and it verifies.
	for _, b := range []string{"bundle", "bundle.zip"} {
		p := filepath.Join(out, b)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", b, err)
		}
		if r := s.asOwner(aerfsBin, "verify", p); r.Code != 14 {
			t.Errorf("the owner's verify of the exported %s: %s", b, r)
		}
	}
	if html, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(html), "<html") {
		t.Errorf("report.html: %v %.200s", err, html)
	}

	// The daemon's reader does not see the signing key: in its own mount
	// namespace the key is masked (read here through /proc/PID/root while
	// an aerfs watch keeps a reader running).
	watching := make(chan Result, 1)
	go func() { watching <- s.asOwner("timeout", "-s", "INT", "3", aerfsBin, "watch", "--all") }()
	keyPath := filepath.Join(s.State, "evidence", "key")
	var readers []string
	waitFor(t, "the daemon's reader to start", func() bool {
		out, _ := exec.Command("pgrep", "-f", "aerfs --state "+s.State).Output()
		readers = strings.Fields(string(out))
		return len(readers) > 0
	})
	for _, pid := range readers {
		if b, err := os.ReadFile("/proc/" + pid + "/root" + keyPath); err == nil && len(b) > 0 {
			t.Errorf("the daemon's reader (pid %s) can read the signing key: %d bytes at %s", pid, len(b), keyPath)
		}
	}
	<-watching

	// A reader that follows the log runs until the owner interrupts it,
	// and then the daemon's reader ends too.
	r := s.asOwner("timeout", "-s", "INT", "2", aerfsBin, "watch", "--all")
	if !strings.Contains(r.Stdout, "MEMORY.md") {
		t.Errorf("owner's aerfs watch --all through the daemon: %s", r)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-f", "aerfs --state "+s.State).Output()
		if len(out) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the daemon's reader outlived the owner's aerfs watch: pids %s", out)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A session cannot have the daemon read the state for it: refused as
	// RO-owner, and recorded.
	r = s.session("USER", "user-r", aerfsBin+" log --path MEMORY.md")
	if r.Code != 4 || !strings.Contains(r.Stderr, "RO-owner") {
		t.Errorf("a session's aerfs log through the daemon: want refused (exit 4, RO-owner): %s", r)
	}
	found := false
	for _, le := range s.Log() {
		m := le.Record.Meta
		if m.Verdict == "deny" && m.Rule == "RO-owner" && m.Session == "user-r" && strings.Contains(m.Reason, "aerfs log") {
			found = true
		}
	}
	if !found {
		t.Errorf("no RO-owner refusal recorded for the session's read of the state")
	}
	// A session's raw request whose command is text of its choosing is
	// refused as RO-owner, and that text reaches neither the record nor
	// the owner's terminal.
	forged := "log\n2099-01-01 FORGED allow \x1b[31mRED"
	b, _ := json.Marshal(map[string]any{"op": "read", "args": []string{forged}})
	r = s.session("USER", "user-inj", `python3 -c 'import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.sendall(sys.argv[2].encode() + b"\n")
print(c.makefile().read())' `+daemon.RootSocketPath(s.State)+` '`+string(b)+`'`)
	if !strings.Contains(r.Stdout, "RO-owner") {
		t.Errorf("a session's raw read request: want refused RO-owner: %s", r)
	}
	found = false
	for _, le := range s.Log() {
		m := le.Record.Meta
		if m.Session != "user-inj" {
			continue
		}
		if strings.Contains(m.Reason, "FORGED") {
			t.Errorf("the session's text reached the record: %q", m.Reason)
		}
		found = found || m.Verdict == "deny" && m.Rule == "RO-owner"
	}
	if !found {
		t.Errorf("no RO-owner refusal recorded for the session's raw request")
	}
	if out := s.Aerfs("log", "--state", s.State, "--workspace", s.WS).Stdout; strings.ContainsRune(out, 0x1b) {
		t.Errorf("aerfs log writes a session's escape sequence raw")
	}

	// Raw requests the owner's client would never send: the reader is
	// confined to reading the state (not its signing key) and the
	// workspace, and writes nothing.
	sock := daemon.RootSocketPath(s.State)
	key := filepath.Join(s.State, "evidence", "key")
	planted := "/root/aerfs-owner-read-planted.zip"
	os.Remove(planted)
	t.Cleanup(func() { os.Remove(planted) })
	raw := func(args ...string) string {
		b, _ := json.Marshal(map[string]any{"op": "read", "args": args})
		r := s.asOwner("python3", "-c", `import socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); c.sendall(sys.argv[2].encode() + b"\n")
print(c.makefile().read())`, sock, string(b))
		// The frames, decoded.
		var got strings.Builder
		for _, l := range strings.Split(r.Stdout, "\n") {
			var f daemon.ReadFrame
			if json.Unmarshal([]byte(l), &f) == nil {
				got.Write(f.Out)
				got.Write(f.Err)
				if f.Exit != nil {
					fmt.Fprintf(&got, "exit %d\n", *f.Exit)
				}
				got.WriteString(f.Error)
			}
		}
		return got.String() + r.Stderr
	}
	secret, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", "--key", "@" + key}, {"verify", key}, {"verify", filepath.Dir(key)}} {
		got := raw(args...)
		if strings.Contains(got, "exit 0") || strings.Contains(got, strings.TrimSpace(string(secret))) || strings.Contains(got, "PRIVATE") {
			t.Errorf("the reader read the signing key (%q): %s", args, got)
		}
	}
	if got := raw("export", "-o", planted); !strings.Contains(got, "exit ") || strings.Contains(got, "exit 0") {
		t.Errorf("the reader's export to a path of its choice: %s", got)
	}
	if _, err := os.Stat(planted); err == nil {
		t.Errorf("the owner's reader wrote %s", planted)
	}
	for _, bad := range [][]string{{"log", "--state", "/etc"}, {"log", "--path", "--", "--state", "/etc"}, {"restore", "MEMORY.md"}, {"snapshot"}, {"owner-read"}} {
		if got := raw(bad...); !strings.Contains(got, "read refused") {
			t.Errorf("raw read %q not refused: %s", bad, got)
		}
	}

	// Unmounted, the daemon is not there to ask: the owner is told to
	// use sudo.
	s.Unmount()
	r = s.asOwner(aerfsBin, "log", "--state", s.State)
	if r.Code == 0 || !strings.Contains(r.Stderr, "sudo aerfs log") {
		t.Errorf("owner's aerfs log while unmounted: want a refusal naming sudo: %s", r)
	}
}

// An agent profile under a root daemon: the owner cannot read the policy,
// and aerfs run --agent learns the guarded home-directory root from the
// daemon — no false "guards no home directory" warning, and the confined
// session may write the agent's memory there (the mount decides it).
func TestOwnerAgentRootsFromTheDaemon(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	s.Unmount()
	pol, err := configs.AgentPolicy("claude-code")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.State, "aerfs.yaml"), pol, 0o600); err != nil {
		t.Fatal(err)
	}
	claude := filepath.Join(s.home, ".claude")
	os.MkdirAll(claude, 0o755)
	os.Chown(claude, s.uid, s.gid)
	t.Cleanup(func() { os.RemoveAll(claude) })
	s.Mount()
	r := s.asOwner(aerfsBin, "run", "--workspace", s.WS, "--agent", "claude-code", "--", "sh", "-c",
		`mkdir -p ~/.claude/projects/p/memory && echo 'a clean note' >> ~/.claude/projects/p/memory/MEMORY.md && cat ~/.claude/projects/p/memory/MEMORY.md`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "a clean note") {
		t.Errorf("a confined claude-code session writing its home-directory memory: %s", r)
	}
	if strings.Contains(r.Stderr, "guards no home directory") {
		t.Errorf("aerfs run --agent warned falsely: %s", r.Stderr)
	}
	// The write is the mount's: recorded under the root's name.
	r = s.asOwner(aerfsBin, "history", "~/.claude/projects/p/memory/MEMORY.md")
	if r.Code != 0 || !strings.Contains(r.Stdout, "write") {
		t.Errorf("owner's history of the home-directory memory: %s", r)
	}
	// The daemon's reader may read the further root's current content.
	r = s.asOwner("sh", "-c", "echo 'a second note' >> ~/.claude/projects/p/memory/MEMORY.md && "+aerfsBin+" diff ~/.claude/projects/p/memory/MEMORY.md --from 1")
	if r.Code != 0 || !strings.Contains(r.Stdout, "+a second note") {
		t.Errorf("owner's diff of the home-directory memory against its current content: %s", r)
	}
}
