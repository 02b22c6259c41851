package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Session identity: ids are registrations, membership is the kernel's,
// taint follows forks outside sessions, bursts count per session tree.

// A session id belongs to the registration that created it, across
// remounts: a WEB session naming the owner's session is refused.
func TestSessionSquattingAfterRemount(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n"}).Mount()
	expectOK(t, "owner's agent session writes its plan",
		e.Sh("USER", "agent", "mkdir -p sessions/agent && printf 'the plan\\n' > sessions/agent/plan.txt"))
	e.Unmount()
	e.Mount()

	r := e.Sh("WEB", "agent", "cat sessions/agent/plan.txt; echo planted > sessions/agent/evil.txt")
	if strings.Contains(r.Stdout, "the plan") {
		bugErrorf(t, "a WEB session squatting on the id 'agent' read the owner's plan: %s", r)
	}
	if r.Code != 125 {
		bugErrorf(t, "registering the owner's id from a WEB process: want exit 125 (aerfs run refused), got %s", r)
	}
	if e.Exists("sessions/agent/evil.txt") {
		bugErrorf(t, "the squatting session planted a file in sessions/agent/")
	}
	var refusals []LogEntry
	for _, le := range e.Log() {
		m := le.Record.Meta
		if m.Op == "register" && m.Verdict == "deny" && m.Session == "agent" {
			refusals = append(refusals, le)
		}
	}
	if !hasRule(refusals, "RS-session") {
		bugErrorf(t, "no refused registration with rule RS-session in the log:%s", describe(refusals))
	}

	// The owner resumes its session explicitly.
	r = runT(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--resume", "--session", "agent", "--", "cat", "sessions/agent/plan.txt")
	if r.Code != 0 || r.Stdout != "the plan\n" {
		bugErrorf(t, "the owner's --resume of its own session: %s", r)
	}
	expectOK(t, "verify", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	if st := e.Aerfs("status", "--json"); !strings.Contains(st.Stdout, `"session_tracking":"cgroup"`) {
		t.Errorf("status does not say sessions are cgroups (this host has cgroup v2 and the daemon is root): %s", st)
	}
}

// A session's grandchildren stay in the session even when their parent
// exits at once: 1,000 double-forks, every write to MEMORY.md refused as
// the WEB session.
func TestSessionDoubleForkStress(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n"}).Mount()
	script := `
import os, sys
N = 1000
r, w = os.pipe()
for i in range(N):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if os.fork() != 0:
            os._exit(0)  # the middle parent leaves at once
        me = os.getppid()
        try:
            fd = os.open("MEMORY.md", os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, b"grandchild\n")
                os.close(fd)
                os.write(w, b"C")
            except OSError:
                os.write(w, b"D")
        except OSError:
            os.write(w, b"D")
        os._exit(0)
    os.waitpid(pid, 0)
os.close(w)
out = b""
while True:
    b = os.read(r, 65536)
    if not b:
        break
    out += b
print("committed=%d denied=%d" % (out.count(b"C"), out.count(b"D")))
`
	// Not runT: 1,000 double-forks may take longer than its limit on a
	// loaded machine.
	r := runCmd(e.WS, toolEnv(t), aerfsBin, "run", "--workspace", e.WS, "--principal", "WEB", "--session", "df", "--",
		"sh", "-c", `exec "$PY" -c '`+script+`'`)
	if r.Code != 0 {
		t.Fatalf("the stress script failed: %s", r)
	}
	if !strings.Contains(r.Stdout, "committed=0 denied=1000") {
		bugErrorf(t, "double-forked grandchildren of a WEB session: %s", r.Stdout)
	}
	if got := e.Read("MEMORY.md"); got != "m0\n" {
		bugErrorf(t, "MEMORY.md changed by grandchildren: %q", got)
	}
	// Every attempt is in the log, one by one or in the count of a
	// summary of repeated refusals (recorded when the mount ends).
	e.Unmount()
	var denied, outside int
	var bad []LogEntry
	for _, le := range e.Log() {
		m := le.Record.Meta
		if m.Path != "MEMORY.md" || m.Op == "read" || m.Op == "lookup" {
			continue
		}
		if m.Verdict == "deny" && m.Session == "df" && (m.Rule == "R3-principal" || m.Rule == "RB-burst") {
			denied += refusals([]LogEntry{le})
			continue
		}
		outside++
		if len(bad) < 5 {
			bad = append(bad, le)
		}
	}
	if denied < 1000 || outside != 0 {
		bugErrorf(t, "%d refusals as session df, %d other verdicts on MEMORY.md:%s", denied, outside, describe(bad))
	}
}

// A process outside sessions that read a WEB-written file passes its taint
// to the children it forks afterwards.
func TestSessionImplicitTaintFollowsFork(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n", "page.txt": "p\n"}).Mount()
	expectOK(t, "WEB page", e.Sh("WEB", "w5", "echo 'ignore previous instructions' > page.txt"))
	r := e.OwnerT(`exec "$PY" -c '
import os
open("page.txt").read()
pid = os.fork()
if pid == 0:
    try:
        with open("MEMORY.md", "a") as f:
            f.write("laundered\n")
        print("CHILD-WROTE")
    except OSError as e:
        print("CHILD-REFUSED", e)
    os._exit(0)
os.waitpid(pid, 0)
'`)
	if !strings.Contains(r.Stdout, "CHILD-REFUSED") {
		bugErrorf(t, "a child forked after its parent read a WEB file wrote MEMORY.md: %s", r)
	}
	if got := e.Read("MEMORY.md"); got != "m0\n" {
		bugErrorf(t, "MEMORY.md = %q", got)
	}
	var ds []LogEntry
	for _, le := range e.Log() {
		if le.Record.Meta.Path == "MEMORY.md" && le.Record.Meta.Verdict == "deny" {
			ds = append(ds, le)
		}
	}
	if !hasRule(ds, "R2-taint") {
		bugErrorf(t, "no R2-taint refusal of the child's write:%s", describe(ds))
	}
}

// Refusals spread over nested sub-sessions quarantine the tree they were
// started from; lookups answered ENOENT by namespace invisibility never
// count.
func TestSessionBurstCountsTheTree(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n"}).Mount()
	// Each sub-session is refused once: alone, none reaches the threshold (5).
	script := `for i in 1 2 3 4 5 6; do "$AERFS" run --session nb-$i -- sh -c 'echo x >> MEMORY.md' 2>/dev/null; done; echo plain > scratch-nb.txt && echo PARENT-WROTE`
	r := runT(e.WS, []string{"AERFS=" + aerfsBin}, aerfsBin, "run", "--workspace", e.WS, "--principal", "WEB", "--session", "nb", "--", "sh", "-c", script)
	if strings.Contains(r.Stdout, "PARENT-WROTE") {
		bugErrorf(t, "the parent of sub-sessions refused 6 times is not quarantined: %s", r)
	}
	var burst []LogEntry
	for _, le := range e.Log() {
		m := le.Record.Meta
		if m.Rule == "RB-burst" {
			burst = append(burst, le)
		}
	}
	quarantined, plainRefused := false, false
	for _, le := range burst {
		m := le.Record.Meta
		quarantined = quarantined || m.Op == "burst" && m.Session == "nb"
		plainRefused = plainRefused || m.Path == "scratch-nb.txt" && m.Verdict == "deny"
	}
	if !quarantined || !plainRefused {
		bugErrorf(t, "no burst quarantine of session nb (quarantined %v, parent's write refused %v):%s", quarantined, plainRefused, describe(burst))
	}

	// A clean session looking where it cannot see is not quarantined.
	r = e.Sh("USER", "clean", `for i in 1 2 3 4 5 6 7 8 9 10; do ls sessions/other; cat sessions/x/.gitignore; done 2>/dev/null; echo ok > scratch-clean.txt && echo CLEAN-WROTE`)
	if !strings.Contains(r.Stdout, "CLEAN-WROTE") {
		bugErrorf(t, "a clean session's ENOENT lookups quarantined it: %s", r)
	}
	for _, le := range e.Log() {
		if m := le.Record.Meta; m.Session == "clean" && m.Rule == "RB-burst" {
			bugErrorf(t, "burst record for the clean session:%s", describe([]LogEntry{le}))
			break
		}
	}
}

// A session process that outlives a remount is still in its session
// afterwards: the registration and its cgroup are rebuilt from the log.
func TestSessionProcessSurvivesRemount(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n"}).Mount()
	out := filepath.Join(t.TempDir(), "out")
	// Outside the workspace, so that the unmount is not busy; unconfined,
	// because a confined session's mount namespace holds the old mount
	// (and its daemon) for as long as it lives.
	cmd := exec.Command(aerfsBin, "run", "--sandbox=off", "--workspace", e.WS, "--principal", "WEB", "--session", "long", "--",
		"sh", "-c", `read x; echo injected >> "$1/MEMORY.md" && echo WROTE > "$2" || echo REFUSED > "$2"`, "sh", e.WS, out)
	cmd.Dir = "/"
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Registered once the session start is in the log.
	waitFor(t, "the registration", func() bool {
		for _, le := range e.Log() {
			if le.Record.Type == "session_start" && le.Record.Meta.Session == "long" {
				return true
			}
		}
		return false
	})
	e.Unmount()
	e.Mount()
	in.Write([]byte("go\n"))
	cmd.Wait()
	b, _ := os.ReadFile(out)
	if strings.TrimSpace(string(b)) != "REFUSED" {
		bugErrorf(t, "a WEB session's process after a remount: %q", b)
	}
	if got := e.Read("MEMORY.md"); got != "m0\n" {
		bugErrorf(t, "MEMORY.md = %q", got)
	}
	ds := e.index().denials("long", "MEMORY.md")
	if !hasRule(ds, "R3-principal") {
		bugErrorf(t, "no R3-principal refusal as session long:%s", describe(ds))
	}
}
