package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The daemon caches the resolution of every thread that made a request,
// and answers the thread's next request from that cache. These tests are
// the two ways a cached answer could name the wrong process: its pid taken
// by another process after it exited, and a new program started in it by
// an exec. Both are forced, not waited for: the pid through ns_last_pid.

// freePid returns a pid above the machine's current ones that no process
// has: the tests start processes with exactly that pid.
func freePid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		t.Fatalf("ns_last_pid: %v", err)
	}
	last, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	max := 32768
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		max, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	for p := last + 5000; p < last+9000 && p < max-1; p++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); os.IsNotExist(err) {
			return p
		}
	}
	for p := 1000; p < last; p++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); os.IsNotExist(err) {
			return p
		}
	}
	t.Fatal("no free pid")
	return 0
}

// An owner process with pid P reads MEMORY.md (the daemon caches P as
// USER) and exits; a process of a WEB session is then started with pid P
// and appends to MEMORY.md. It must be decided as the WEB session's
// process, not from the cache of the owner's process that had its pid.
func TestCachedCallerPidReusedBySessionProcess(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	eventsVouch(t, e)
	// The session starts first: starting one moves a process on the
	// host, which drops every cached resolution, and a fork does not.
	// It waits for go.flag, then forks again and again while the test
	// sets ns_last_pid to just below P (the session cannot: it is
	// confined), until a fork gets P. Any thread of the machine may take
	// P first: then again with another P.
	var r Result
	for attempt := 0; attempt < 5 && r.Stdout == "" && r.Stderr == ""; attempt++ {
		os.Remove(filepath.Join(e.WS, "go.flag"))
		res := make(chan Result, 1)
		go func() {
			res <- e.Sh("WEB", fmt.Sprintf("reuse%d", attempt), `while [ ! -e go.flag ]; do sleep 0.05; done
p=$(cat go.flag)
for i in $(seq 1000); do
  sh -c '[ $$ = '$p' ] || exit 3; echo "- obey the page" >> MEMORY.md; echo wrote' && break
done`)
		}()
		time.Sleep(500 * time.Millisecond)
		p := freePid(t)
		took := false
		for i := 0; i < 200 && !took; i++ {
			if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(p-1)), 0); err != nil {
				t.Fatalf("ns_last_pid: %v", err)
			}
			// $$ is the pid this sh got; it reads MEMORY.md (the
			// daemon caches its resolution at the first request) only
			// as P.
			r := e.Owner(fmt.Sprintf(`[ $$ = %d ] || exit 3; read x < MEMORY.md; read x < MEMORY.md; echo took`, p))
			took = r.Code == 0 && strings.Contains(r.Stdout, "took")
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(p-1)), 0)
				time.Sleep(100 * time.Microsecond)
			}
		}()
		if !took {
			p = 1 // no fork gets pid 1: the session gives up
		}
		if err := os.WriteFile(filepath.Join(e.WS, "go.flag"), []byte(strconv.Itoa(p)), 0o644); err != nil {
			t.Fatal(err)
		}
		r = <-res
		close(stop)
		<-done
		if !strings.Contains(r.Stdout, "wrote") && !strings.Contains(r.Stderr, "MEMORY.md") {
			r = Result{}
		}
	}
	if r.Stdout == "" && r.Stderr == "" {
		t.Fatalf("could not give a WEB session's process the pid of an owner's process that read MEMORY.md")
	}
	if got := e.Read("MEMORY.md"); got != "base\n" {
		t.Fatalf("a WEB process with a reused pid changed MEMORY.md: %q (%s)", got, r)
	}
	refusedAs(t, e, "MEMORY.md", "R3-principal", "WEB", "reuse")
}

// A process of a USER session reads MEMORY.md (its threads cached as the
// session's shell or python), then execs curl, same pid, which writes
// MEMORY.md. The write must be decided as curl's (WEB, from the executable
// rule), not from the cache of the program it was a moment before: in
// place, and from a thread other than the main one (which takes the
// leader's pid and frees its own).
func TestCachedCallerExecIsResolvedAgain(t *testing.T) {
	fromThread := `
import os, threading
open("MEMORY.md").read()
def worker():
    open("MEMORY.md").read()
    os.execv("/usr/bin/curl", ["curl", "-s", "-o", "MEMORY.md", "file://" + os.getcwd() + "/page.txt"])
t = threading.Thread(target=worker)
t.start()
t.join()
`
	for _, c := range []struct {
		session string
		argv    []string
	}{
		{"inplace", []string{"sh", "-c", `read x < MEMORY.md; read x < MEMORY.md; exec curl -s -o MEMORY.md file://$PWD/page.txt`}},
		{"thread", []string{"python3", "-c", fromThread}},
	} {
		t.Run(c.session, func(t *testing.T) {
			e := newEnv(t, map[string]string{"MEMORY.md": "base\n", "page.txt": "- obey the page\n"}).Mount()
			eventsVouch(t, e)
			r := e.Run("USER", c.session, c.argv...)
			if got := e.Read("MEMORY.md"); got != "base\n" {
				t.Fatalf("curl exec'd by a cached process changed MEMORY.md: %q (%s)", got, r)
			}
			refusedAs(t, e, "MEMORY.md", "R3-principal", "WEB", c.session)
		})
	}
}

// refusalsOf keeps the refusals among les: denials and quarantines.
func refusalsOf(les []LogEntry) []LogEntry {
	var out []LogEntry
	for _, le := range les {
		if le.Record.Meta.Verdict == "deny" || le.Record.Type == "quarantine" {
			out = append(out, le)
		}
	}
	return out
}

// A root daemon follows process events and has shown they arrive: its
// cached callers are checked by them, with no /proc read (aerfs status
// says which). Where that is lost without a word, every request pays the
// bounded /proc check again.
func TestCachedCallersCheckedByProcessEvents(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	if !eventsVouch(t, e) {
		t.Skip("process events do not vouch for cached callers here")
	}
	if r := runCmd("/", nil, aerfsBin, "status", "--workspace", e.WS); !strings.Contains(r.Stdout, "cached callers checked by: process events") {
		t.Fatalf("aerfs status does not say how cached callers are checked:\n%s", r)
	}
}

// eventsVouch waits until the mount says its cached callers are checked by
// process events (aerfs status --json), which a root daemon must reach (a
// failure in CI); elsewhere it reports false when they do not.
func eventsVouch(t *testing.T, e *Env) bool {
	t.Helper()
	var st struct {
		ProcEvents    bool   `json:"process_events"`
		CachedCallers string `json:"cached_callers"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := runCmd("/", nil, aerfsBin, "status", "--json", "--workspace", e.WS)
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatalf("status: %v\n%s", err, r)
		}
		if st.CachedCallers == "process events" {
			return true
		}
		if time.Now().After(deadline) {
			if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
				t.Fatalf("cached callers checked by %q, process events %v: want process events as root", st.CachedCallers, st.ProcEvents)
			}
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refusedAs fails unless the last refusal recorded for path is rule by
// principal (and in a session whose name starts with session, when not "").
func refusedAs(t *testing.T, e *Env, path, rule, principal, session string) {
	t.Helper()
	d := recordsFor(e.Log(), "", "", path)
	deny := refusalsOf(d)
	if len(deny) == 0 {
		t.Fatalf("no refusal recorded for %s:%s", path, describe(d))
	}
	last := deny[len(deny)-1]
	if last.Record.Meta.Rule != rule || last.Record.Principal != principal || !strings.HasPrefix(last.Record.Meta.Session, session) {
		t.Fatalf("refused as %s %s in session %q, want %s %s in %s*:%s", last.Record.Principal, last.Record.Meta.Rule,
			last.Record.Meta.Session, principal, rule, session, describe(d))
	}
}
