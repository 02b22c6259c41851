package integration

// The state directory is the daemon's (docs/confinement.md): with the
// daemon root, it is root-owned and mode 0700, and the owner's commands
// reach it through the control socket, which lives outside it under
// /run/aerfs/. Neither a session, confined or not, nor the owner's own
// processes outside sessions can rewrite the policy the daemon loads.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerfs/aerfs/daemon"
)

// policyLoads counts the policy_load records in the log.
func policyLoads(e *Env) int {
	n := 0
	for _, le := range e.Log() {
		if le.Record.Type == "policy_load" {
			n++
		}
	}
	return n
}

func TestStateDirRootOwned(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	pol := filepath.Join(s.State, "aerfs.yaml")
	before, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	loads := policyLoads(s.Env)
	// An extra class the attacker would use: any edit the daemon accepts
	// is a policy reload.
	evil := "# rewritten by the attacker\n"
	attack := `try() { name=$1; shift; if err=$("$@" 2>&1); then echo "$name ok"; else echo "$name ${err##*: }"; fi; }
try policy-write sh -c 'printf "%s" "$EVIL" >> "$STATE/aerfs.yaml"'
if mkdir "$STATE/planted" 2>/dev/null; then echo "state-mkdir ok"; else echo "state-mkdir refused"; fi`
	cases := []struct {
		name string
		r    func() Result
	}{
		{"unconfined WEB session", func() Result {
			return s.session("WEB", "web-off", "EVIL='"+evil+"'; export EVIL\n"+attack, "--sandbox=off")
		}},
		{"owner outside sessions", func() Result {
			return s.asOwner("sh", "-c", "EVIL='"+evil+"'; export EVIL\n"+attack)
		}},
		{"confined WEB session", func() Result {
			return s.session("WEB", "web-on", "EVIL='"+evil+"'; export EVIL\n"+attack)
		}},
	}
	for _, c := range cases {
		r := c.r()
		got := parseAttempts(r.Stdout)
		t.Logf("%s: %s%s", c.name, r.Stdout, r.Stderr)
		if w := got["policy-write"]; w == "ok" || w == "" {
			t.Errorf("%s rewrote the policy file in the state directory: %q", c.name, w)
		} else if !strings.Contains(w, "Permission denied") && !strings.Contains(w, "No such file or directory") && !strings.Contains(w, "Read-only") {
			t.Errorf("%s: policy write failed with %q, want Permission denied", c.name, w)
		}
		if got["state-mkdir"] != "refused" {
			t.Errorf("%s made a directory in the state directory: %q", c.name, got["state-mkdir"])
		}
	}
	time.Sleep(700 * time.Millisecond) // the policy watcher's debounce
	if after, _ := os.ReadFile(pol); string(after) != string(before) {
		t.Errorf("the policy file changed:\n%s", after)
	}
	if n := policyLoads(s.Env); n != loads {
		t.Errorf("the daemon loaded a rewritten policy (%d policy_load records, %d before)", n, loads)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(s.State, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Mode&0o777 != 0o700 {
		t.Errorf("state directory owner %d mode %o, want root 0700", st.Uid, st.Mode&0o777)
	}
	// The owner's commands reach the daemon through the socket outside
	// the state directory.
	r := s.asOwner(aerfsBin, "status", "--workspace", s.WS)
	if r.Code != 0 || !strings.Contains(r.Stdout, "root-owned 0700") || !strings.Contains(r.Stdout, "/run/aerfs/") {
		t.Errorf("owner's aerfs status: %s", r)
	}
	// --state alone, from outside the workspace: the mount table names
	// the workspace of a state directory the owner cannot read.
	r = s.asOwner("sh", "-c", "cd / && "+aerfsBin+" status --state "+s.State)
	if r.Code != 0 || !strings.Contains(r.Stdout, s.WS) || !strings.Contains(r.Stdout, "/run/aerfs/") {
		t.Errorf("owner's aerfs status --state: %s", r)
	}
	r = s.asOwner(aerfsBin, "taint", "--workspace", s.WS, "--session", "web-on", "UNTRUSTED")
	if r.Code != 0 {
		t.Errorf("owner's aerfs taint through the socket: %s", r)
	}
	// The owner's readers of the state directory are run by the daemon
	// for them (TestOwnerReadsThroughTheDaemon).
	r = s.asOwner(aerfsBin, "log", "--state", s.State, "--type", "policy_load")
	if r.Code != 0 || !strings.Contains(r.Stdout, "policy_load") {
		t.Errorf("owner's aerfs log --state on a root-owned state: %s", r)
	}
	// As root they work, through --state too.
	if r := s.Aerfs("verify", "--state", s.State); r.Code != 0 {
		t.Errorf("root's aerfs verify: %s", r)
	}
}

// aerfs status shows each live session's confinement as aerfs run applied
// it (and /proc shows it), and an unconfined session cannot claim one.
func TestStatusConfinement(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	s.startSession(t, "WEB", "conf-on")
	// The unconfined session's command tries to report a confinement it
	// does not have.
	fake := `import json, os, socket, sys
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
c.sendall((json.dumps({"op": "confined", "sandbox": json.dumps({"landlock_abi": 7, "landlock": True, "seccomp": True, "no_new_privs": True})}) + "\n").encode())
print("fake:", c.makefile().readline().strip())`
	r := s.session("WEB", "conf-off", "/usr/bin/python3 -c '"+fake+"' "+daemon.RootSocketPath(s.State)+"; sleep 1", "--sandbox=off")
	// Refused either way: the reporter is not the session's root process
	// (sh runs python as a child), and the session registered unconfined.
	if !strings.Contains(r.Stdout, `"ok":false`) || !(strings.Contains(r.Stdout, "reported once") || strings.Contains(r.Stdout, "root process")) {
		t.Errorf("an unconfined session's confinement report was not refused: %s", r)
	}
	r = s.asOwner(aerfsBin, "status", "--verbose", "--workspace", s.WS)
	t.Logf("status:\n%s", r.Stdout)
	// A session's confinement report is wrapped over its continuation
	// lines, up to its network line: joined back into one.
	report := func(session string) string {
		lines := strings.Split(r.Stdout, "\n")
		for i, l := range lines {
			if !strings.HasPrefix(strings.TrimSpace(l), session+" ") {
				continue
			}
			var parts []string
			for _, c := range lines[i+1:] {
				c = strings.TrimSpace(c)
				if c == "" || strings.HasPrefix(c, "network:") {
					break
				}
				parts = append(parts, c)
			}
			return strings.Join(parts, " ")
		}
		return ""
	}
	on, off := report("conf-on"), report("conf-off")
	for _, want := range []string{"confined: landlock abi", "writes " + s.WS, "hidden " + s.State, "user+mount+net namespaces", "seccomp", "kernel: no_new_privs, seccomp filter, own user+mnt+net namespaces"} {
		if !strings.Contains(on, want) {
			t.Errorf("status of the confined session lacks %q: %q", want, on)
		}
	}
	if !strings.Contains(off, "unconfined (--sandbox=off)") {
		t.Errorf("status of the --sandbox=off session: %q", off)
	}
}

// A rootless mount keeps the state directory the owner's, with the socket
// in it, and aerfs status says that sessions are kept out by confinement.
func TestStateDirRootless(t *testing.T) {
	u, home := rootlessUser(t)
	bin := publicBinary(t)
	ws, state := filepath.Join(home, "ws"), filepath.Join(home, "state")
	envsMu.Lock()
	envs[ws] = true
	envsMu.Unlock()
	openFuseToUsers(t)
	expectOK(t, "init as the owner", asUser(u, home, "mkdir ws && "+bin+" init --state "+state+" "+ws))
	expectOK(t, "rootless mount", asUser(u, home, bin+" mount --state "+state+" "+ws))
	t.Cleanup(func() {
		if (&Env{WS: ws}).Mounted() {
			asUser(u, "/", bin+" unmount "+ws)
		}
	})
	r := asUser(u, "/", bin+" status --workspace "+ws+" --state "+state)
	if r.Code != 0 || !strings.Contains(r.Stdout, "owner's (rootless); sessions kept out by confinement, control socket "+filepath.Join(state, "control.sock")) {
		t.Errorf("rootless status: %s", r)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(state, &st); err != nil || strconv.Itoa(int(st.Uid)) != u.Uid {
		t.Errorf("the rootless state directory is not the owner's: uid %d", st.Uid)
	}
	// A confined session cannot reach it; its nested aerfs commands still
	// reach the daemon.
	r = asUser(u, "/", "cd "+ws+" && "+bin+" run --principal WEB -- sh -c 'echo x >> "+state+"/aerfs.yaml; "+bin+" status >/dev/null && echo nested-ok'")
	if !strings.Contains(r.Stderr, "Read-only file system") && !strings.Contains(r.Stderr, "Permission denied") || !strings.Contains(r.Stdout, "nested-ok") {
		t.Errorf("confined session under a rootless mount: %s", r)
	}
	expectOK(t, "aerfs unmount as the owner", asUser(u, "/", bin+" unmount "+ws))
}

// The state directory's parent is the owner's: an owner process renames the
// root daemon's state directory away and puts a fresh one of its own in its
// place (a new log, a policy of its choosing). The next root mount refuses
// it: the workspace is pinned to its evidence log (daemon/pin.go).
func TestStateDirSubstitutionRefused(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"MEMORY.md": "# memory\n"})
	expectOK(t, "owner's line", s.asOwner("sh", "-c", "echo 'owner line' >> MEMORY.md"))
	s.Unmount()
	old := s.State + ".old"
	t.Cleanup(func() { os.RemoveAll(old) })
	sub := s.asOwner("sh", "-c", `mv "$STATE" "$STATE.old" && `+aerfsBin+` init --state "$STATE" "$WS" && printf '\n# the attacker was here\n' >> "$STATE/aerfs.yaml"`)
	if sub.Code != 0 {
		t.Fatalf("the owner's substitution: %s", sub)
	}
	r := s.Aerfs("mount", "--state", s.State, s.WS)
	if r.Code == 0 {
		s.Unmount()
		t.Fatalf("a root mount adopted the owner's substitute state directory: %s", r)
	}
	if !strings.Contains(r.Stderr, "another evidence log") || !strings.Contains(r.Stderr, "--new-state") {
		t.Errorf("the refusal does not say why and how: %s", r)
	}
	// The same with the genuine public key copied in (aerfs key prints
	// it to anyone): the substitute's signing key is not the pinned one.
	pub := strings.TrimSpace(s.Aerfs("key", "--state", old).Stdout)
	if !strings.Contains(pub, "+") {
		t.Fatalf("aerfs key --state %s: %q", old, pub)
	}
	if err := os.WriteFile(filepath.Join(s.State, "evidence", "key.pub"), []byte(pub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = s.Aerfs("mount", "--state", s.State, s.WS)
	if r.Code == 0 {
		s.Unmount()
		t.Fatalf("a root mount adopted a substitute carrying the genuine public key: %s", r)
	}
	if !strings.Contains(r.Stderr, "another evidence log") {
		t.Errorf("the refusal of a substitute with the genuine public key does not say why: %s", r)
	}
	// The genuine state directory, moved back, mounts: it has the key.
	expectOK(t, "the owner moves the old state back", s.asOwner("sh", "-c", `rm -rf "$STATE" && mv "$STATE.old" "$STATE"`))
	s.Mount()
	if got := s.Read("MEMORY.md"); !strings.Contains(got, "owner line") {
		t.Errorf("MEMORY.md = %q", got)
	}
	s.Unmount()
	// Moved whole elsewhere, it still mounts (same log), and the pin follows.
	moved := s.State + ".moved"
	t.Cleanup(func() { os.RemoveAll(moved) })
	if err := os.Rename(s.State, moved); err != nil {
		t.Fatal(err)
	}
	expectOK(t, "mount of the moved state", s.Aerfs("mount", "--state", moved, s.WS))
	s.State = moved
	s.Unmount()
	// A new log on purpose: root says so, and the mount record carries it.
	fresh := s.State + ".fresh"
	t.Cleanup(func() { os.RemoveAll(fresh) })
	expectOK(t, "owner inits a fresh state", s.asOwner(aerfsBin, "init", "--state", fresh, s.WS))
	if r := s.Aerfs("mount", "--state", fresh, s.WS); r.Code == 0 {
		t.Errorf("a fresh state mounted without --new-state: %s", r)
		s.State = fresh
		s.Unmount()
	} else if !strings.Contains(r.Stderr, "another evidence log") || !strings.Contains(r.Stderr, "--new-state") {
		t.Errorf("the refusal of a fresh state does not say why and how: %s", r)
	}
	expectOK(t, "mount --new-state", s.Aerfs("mount", "--new-state", "--state", fresh, s.WS))
	s.State = fresh
	found := false
	for _, le := range s.Log() {
		if le.Record.Type == "mount" && strings.Contains(le.Record.Meta.Reason, "new log for this workspace") {
			found = true
		}
	}
	if !found {
		t.Errorf("the new log's mount record does not say it replaced a pinned log")
	}
	s.Unmount()
}

// The owner builds a substitute state directory around the genuine log:
// its own policy (MEMORY.md no longer memory), a symbolic link to the
// genuine evidence (so the key checks out), and the daemon's log linked to
// a file of the owner's choosing. A root mount must refuse it before it
// reads the policy or opens the log, and root must create nothing through
// the link. Before this, the mount succeeded, a WEB session appended to
// MEMORY.md, and root created the linked file.
func TestStateDirLinkedSubstituteRefused(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"MEMORY.md": "# memory\n"})
	s.Unmount()
	victim := filepath.Join(t.TempDir(), "made-by-root")
	genuine := s.State + ".g"
	t.Cleanup(func() { os.RemoveAll(genuine) })
	sub := s.asOwner("sh", "-c", `mv "$STATE" "$STATE.g" && mkdir -m 700 "$STATE" && `+
		`printf 'version: 1\n' > "$STATE/aerfs.yaml" && ln -s "$STATE.g/evidence" "$STATE/evidence" && `+
		`ln -s `+victim+` "$STATE/daemon.log" && ln -s `+victim+` "$STATE/daemon.stderr"`)
	if sub.Code != 0 {
		t.Fatalf("the owner's substitution: %s", sub)
	}
	r := s.Aerfs("mount", "--state", s.State, s.WS)
	if r.Code == 0 {
		s.Unmount()
		t.Fatalf("a root mount adopted a substitute linking to the genuine evidence: %s", r)
	}
	if !strings.Contains(r.Stderr, "symbolic link") {
		t.Errorf("the refusal does not say why: %s", r)
	}
	if _, err := os.Lstat(victim); err == nil {
		t.Errorf("root created %s through the substitute's link", victim)
	}
	// Without the links, the owner's own directory is still not the one
	// root took over at the first mount.
	expectOK(t, "the owner removes the links", s.asOwner("sh", "-c", `rm "$STATE/daemon.log" "$STATE/daemon.stderr" "$STATE/evidence" && cp -r "$STATE.g/evidence" "$STATE/evidence" 2>/dev/null; mkdir -p "$STATE/evidence"`))
	r = s.Aerfs("mount", "--state", s.State, s.WS)
	if r.Code == 0 {
		s.Unmount()
		t.Fatalf("a root mount adopted the owner's substitute: %s", r)
	}
	if !strings.Contains(r.Stderr, "is not root's") || !strings.Contains(r.Stderr, "--new-state") {
		t.Errorf("the refusal does not say why and how: %s", r)
	}
}
