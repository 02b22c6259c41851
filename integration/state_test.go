package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The state a mount reads: the log's index as of its last checkpoint and
// the records since, never trusted over the log; sessions that ended
// leave the registry and status, and stay bound to their registration.

// historyHashes lists the content hashes of path's versions.
func historyHashes(t *testing.T, e *Env, path string) []string {
	t.Helper()
	r := e.Aerfs("history", "--json", "--workspace", e.WS, path)
	if r.Code != 0 {
		t.Fatalf("history %s: %s", path, r)
	}
	var vs []struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &vs); err != nil {
		t.Fatalf("history --json: %v: %s", err, r.Stdout)
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.Hash)
	}
	return out
}

// indexEvents returns the "index" lines of the daemon log.
func indexEvents(t *testing.T, e *Env) []map[string]any {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(e.State, "daemon.log"))
	var out []map[string]any
	for _, l := range strings.Split(string(b), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["event"] == "index" {
			out = append(out, m)
		}
	}
	return out
}

// A daemon killed after the index's last checkpoint leaves an index older
// than the log. The next mount reads it and the records since — and knows
// everything: every version, and the registration made after the index,
// which still binds its id.
func TestRemountAfterCrashWithStaleIndex(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "v0\n"}).Mount()
	expectOK(t, "first version", e.Sh("USER", "s1", "echo v1 > MEMORY.md"))
	e.Unmount() // the index is written after the unmount record
	e.Mount()
	// Past the index: a session registered (its id now bound), a version.
	expectOK(t, "a WEB session reads", e.Sh("WEB", "web1", "cat MEMORY.md > /dev/null"))
	expectOK(t, "second version", e.Sh("USER", "s2", "echo v2 > MEMORY.md"))
	pid := daemonPid(t, e)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return syscall.Kill(pid, 0) != nil })
	before := len(indexEvents(t, e))
	expectOK(t, "remount", runCmd("/", nil, aerfsBin, "mount", "--state", e.State, e.WS))

	// The mount read the index it found (older than the log), not the
	// whole log, and did not set it aside.
	ev := indexEvents(t, e)
	if len(ev) <= before || ev[len(ev)-1]["message"] != "the log's index read" {
		t.Fatalf("the mount did not read the log's index: %v", ev[before:])
	}
	for _, le := range e.records("recovery", "") {
		if le.Record.Meta.Op == "index" {
			t.Fatalf("a stale index was set aside as damaged: %s", le.Record.Meta.Reason)
		}
	}
	hs := strings.Join(historyHashes(t, e, "MEMORY.md"), " ")
	for _, v := range []string{"v1\n", "v2\n"} {
		if !strings.Contains(hs, sha(v)) {
			t.Errorf("history lacks %q, recorded after the index's checkpoint: %s", v, hs)
		}
	}
	// The id registered after the index's checkpoint is bound to its
	// registration: another registration of it is refused.
	r := e.Sh("USER", "web1", "echo taken >> MEMORY.md")
	if r.Code == 0 {
		bugErrorf(t, "a second registration of web1 (registered after the index, before the crash) went through: %s", r)
	}
	if !hasRule(e.registrationsDenied("web1"), "RS-session") {
		bugErrorf(t, "no refused registration of web1 with rule RS-session")
	}
	expectOK(t, "verify", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
}

// registrationsDenied lists the refused registrations of session id.
func (e *Env) registrationsDenied(id string) []LogEntry {
	var out []LogEntry
	for _, le := range e.Log() {
		m := le.Record.Meta
		if m.Op == "register" && m.Verdict == "deny" && m.Session == id {
			out = append(out, le)
		}
	}
	return out
}

// An index whose bytes were changed (a segment, the state file) is not
// believed: the mount sets it aside, rebuilds it from the log and records
// why (a recovery record, op "index"); what it answers is the log's. The
// next mount reads the rebuilt index without a word.
func TestTamperedIndexIsRebuiltFromTheLog(t *testing.T) {
	for _, file := range []string{"state-*", "seg-*"} {
		t.Run(strings.TrimSuffix(file, "-*"), func(t *testing.T) {
			e := newEnv(t, map[string]string{"MEMORY.md": "v0\n"}).Mount()
			expectOK(t, "a version", e.Sh("USER", "s1", "echo v1 > MEMORY.md"))
			expectOK(t, "a WEB session", e.Sh("WEB", "web1", "cat MEMORY.md > /dev/null"))
			e.Unmount()
			m, _ := filepath.Glob(filepath.Join(e.State, "evidence", "ix", file))
			if len(m) == 0 {
				t.Fatalf("no %s in the index after an unmount", file)
			}
			b, err := os.ReadFile(m[0])
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x01
			if err := os.WriteFile(m[0], b, 0o600); err != nil {
				t.Fatal(err)
			}
			e.Mount()
			var rebuilt []LogEntry
			for _, le := range e.records("recovery", "") {
				if le.Record.Meta.Op == "index" {
					rebuilt = append(rebuilt, le)
				}
			}
			if len(rebuilt) != 1 || !strings.Contains(rebuilt[0].Record.Meta.Reason, "set aside and rebuilt from the log") {
				bugErrorf(t, "the tampered %s was not reported as set aside (recovery op index):%s", file, describe(rebuilt))
			}
			if hs := strings.Join(historyHashes(t, e, "MEMORY.md"), " "); !strings.Contains(hs, sha("v1\n")) {
				t.Errorf("history after the rebuild lacks v1: %s", hs)
			}
			if r := e.Sh("WEB", "s1", "true"); r.Code == 0 {
				bugErrorf(t, "after the rebuild, a WEB registration took the owner's session id s1: %s", r)
			}
			e.Unmount()
			e.Mount()
			n := 0
			for _, le := range e.records("recovery", "") {
				if le.Record.Meta.Op == "index" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("the rebuilt index was set aside again at the next mount (%d index recoveries)", n)
			}
		})
	}
}

// waitRetired waits for the daemon to retire session id.
func waitRetired(t *testing.T, e *Env, id string) {
	t.Helper()
	waitFor(t, "session "+id+" to be retired", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.State, "daemon.log"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"event":"retire"`) && strings.Contains(l, `"`+id+`"`) {
				return true
			}
		}
		return false
	})
}

// A session that ended leaves aerfs status and the default session list
// once the daemon retires it (it has no process left); it stays in the log,
// and aerfs session list --all shows it. A live session stays.
func TestEndedSessionsLeaveStatus(t *testing.T) {
	t.Setenv("AERFS_SESSION_SWEEP_MS", "200")
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "a session that ends", e.Sh("WEB", "gone", "cat MEMORY.md > /dev/null"))
	waitRetired(t, e, "gone")
	done := make(chan Result, 1)
	go func() { done <- e.Sh("USER", "stays", "sleep 20") }()
	defer func() {
		e.Aerfs("session", "end", "stays", "--workspace", e.WS)
		<-done
	}()
	waitFor(t, "the live session to show", func() bool {
		return strings.Contains(e.Aerfs("status", "--workspace", e.WS).Stdout, "stays")
	})
	st := e.Aerfs("status", "--workspace", e.WS)
	if strings.Contains(st.Stdout, "gone") {
		bugErrorf(t, "aerfs status lists the ended session 'gone':\n%s", st.Stdout)
	}
	if l := e.Aerfs("session", "list", "--workspace", e.WS); strings.Contains(l.Stdout, "gone") || !strings.Contains(l.Stdout, "stays") {
		bugErrorf(t, "aerfs session list (without --all): %s", l)
	}
	all := e.Aerfs("session", "list", "--all", "--workspace", e.WS)
	i := strings.Index(all.Stdout, "gone ")
	if i < 0 || !strings.Contains(all.Stdout[i:], "ended ") || !strings.Contains(all.Stdout[i:], "WEB_DERIVED") {
		bugErrorf(t, "aerfs session list --all does not show the ended session with its taint: %s", all)
	}
}

// A session retired from the daemon's memory (ended, no process left) is
// still the session its registration made: resumed by the owner it is as
// tainted as it was, and another registration of its id is refused. Its
// explanation is still there for the owner.
func TestRetiredSessionStaysBoundToItsRegistration(t *testing.T) {
	t.Setenv("AERFS_SESSION_SWEEP_MS", "200")
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "a session declares what it read",
		e.Sh("USER", "agent", aerfsBin+" taint --workspace "+e.WS+" --session agent WEB_DERIVED"))
	waitRetired(t, e, "agent")
	// The owner rejoins it: the taint is still there, and the write it
	// tries is refused for it.
	r := runT(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--resume", "--session", "agent", "--",
		"sh", "-c", "echo poisoned >> MEMORY.md")
	if r.Code == 0 || e.Read("MEMORY.md") != "m\n" {
		bugErrorf(t, "the resumed retired session wrote MEMORY.md, its taint washed by retirement: %s", r)
	}
	var denied []LogEntry
	for _, le := range e.Denials("MEMORY.md") {
		if le.Record.Meta.Session == "agent" {
			denied = append(denied, le)
		}
	}
	if !hasRule(denied, "R2-taint") {
		bugErrorf(t, "the resumed session's write was not refused for its taint (R2-taint):%s", describe(denied))
	}
	// A process of another session cannot take the id over, retired or
	// not.
	time.Sleep(500 * time.Millisecond) // retired again
	if r := e.Sh("USER", "other", aerfsBin+" run --workspace "+e.WS+" --principal USER --session agent -- true"); r.Code == 0 {
		bugErrorf(t, "a registration from another session took the retired session id: %s", r)
	}
	if !hasRule(e.registrationsDenied("agent"), "RS-session") {
		bugErrorf(t, "no refused registration of the retired id with rule RS-session")
	}
	if w := e.Aerfs("why", "--session", "agent", "--workspace", e.WS); w.Code != 0 || !strings.Contains(w.Stdout, "WEB_DERIVED") {
		t.Errorf("aerfs why --session of a retired session: %s", w)
	}
}
