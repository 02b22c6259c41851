//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	fm "github.com/aerfs/aerfs/e2e/fakemodel"
)

// rounds is how many times a scenario runs its client in a row in one
// workspace, aerfs state and client home: the second run sees what the
// first left (the client's caches and state files in its home, the log,
// pending items, labels), as a client run every day does.
const rounds = 2

// round is one run of a scenario in the workspace, state and home its
// rounds share. Its checks read only what happened since it began.
type round struct {
	t     *testing.T
	n     int // 1 … rounds
	e     *env
	home  string
	start int64 // the last log record's idx before the round began
}

// starting is a scenario's starting files: their content at the start of
// every round, and the files its runs make (absent at the start). A path
// is relative to the workspace, or absolute (a file of the client's home).
type starting struct {
	files map[string]string
	made  []string
	// rounds, when not 0, runs the scenario fewer times than rounds (the
	// scenario says why).
	rounds int
}

// inRounds runs body once per round in e and home. Before every round but
// the first, the owner — outside sessions, through the mount, recorded
// like any owner edit — puts the starting files back to their content and
// removes the files the runs made, so that the script's edits with fixed
// old and new strings apply again. The problems of each round are said
// with its number; facts are joined as "round 1: … | round 2: …". When a
// round has problems, the whole evidence log is saved beside the clients'
// output (saveLog).
func inRounds(t *testing.T, e *env, home string, st starting, body func(rd *round) (problems []string, facts string)) ([]string, string) {
	t.Helper()
	var problems, facts []string
	last := rounds
	if st.rounds != 0 {
		last = st.rounds
	}
	for n := 1; n <= last; n++ {
		if n > 1 {
			e.restore(st)
		}
		rd := &round{t: t, n: n, e: e, home: home, start: e.lastIdx()}
		p, f := body(rd)
		for _, q := range p {
			problems = append(problems, fmt.Sprintf("round %d: %s", n, q))
		}
		facts = append(facts, fmt.Sprintf("round %d: %s", n, f))
	}
	if len(problems) > 0 {
		saveLog(t, e.log())
	}
	return problems, strings.Join(facts, roundSep)
}

// roundSep separates the rounds' facts in a scenario's report.
const roundSep = " | "

// restore puts the starting files back as the owner: a fresh process
// outside sessions (the test binary itself never touches labelled files).
func (e *env) restore(st starting) {
	e.t.Helper()
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(e.WS, p)
	}
	for _, p := range st.made {
		if _, err := os.Lstat(abs(p)); err == nil {
			e.owner("", "rm -f -- "+shellq(abs(p)))
		}
	}
	for _, p := range sortedKeys(st.files) {
		if got, ok := e.read(abs(p)); ok && got == st.files[p] {
			continue
		}
		e.owner(st.files[p], "mkdir -p -- "+shellq(filepath.Dir(abs(p)))+" && cat > "+shellq(abs(p)))
		if got, _ := e.read(abs(p)); got != st.files[p] {
			e.t.Fatalf("the owner's restore of %s left %q", p, got)
		}
	}
}

// owner runs a shell script as the owner in the workspace, stdin given.
func (e *env) owner(stdin, script string) {
	e.t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = e.WS
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("owner: %s: %v\n%s", script, err, out)
	}
}

// lastIdx is the idx of the log's last record (-1: none).
func (e *env) lastIdx() int64 {
	e.t.Helper()
	last := int64(-1)
	for _, le := range e.log() {
		if le.Idx > last {
			last = le.Idx
		}
	}
	return last
}

// session is the round's name for a scenario's session: unique per round,
// as a session id belongs to the registration that created it (and a
// rejoined session would carry the first round's taint).
func (rd *round) session(name string) string { return fmt.Sprintf("%s-r%d", name, rd.n) }

// run runs the client in the workspace with the round's home, as the
// round's session of the given name.
func (rd *round) run(c *client, principal, name, prompt string, steps []fm.Step) result {
	rd.t.Helper()
	return runClientHome(rd.t, c, rd.e.WS, principal, rd.session(name), prompt, steps, false, rd.home)
}

// log is the records appended since the round began.
func (rd *round) log() []logEntry {
	var out []logEntry
	for _, le := range rd.e.log() {
		if le.Idx > rd.start {
			out = append(out, le)
		}
	}
	return out
}

// historyLen is the number of versions of a guarded file recorded since
// the round began (-1: history failed).
func (rd *round) historyLen(rel string) int {
	out, err := rd.e.aerfs("history", "--json", "--state", rd.e.State, "--workspace", rd.e.WS, rel)
	if err != nil {
		return -1
	}
	var vs []struct {
		Idx int64 `json:"idx"`
	}
	if json.Unmarshal([]byte(out), &vs) != nil {
		return -1
	}
	n := 0
	for _, v := range vs {
		if v.Idx > rd.start {
			n++
		}
	}
	return n
}

// pending is the paths of the round's session's writes kept for approval.
func (rd *round) pending(name string) []string {
	var ps []string
	for _, it := range rd.e.pendingItems() {
		if it.Session == rd.session(name) {
			ps = append(ps, it.Path)
		}
	}
	sort.Strings(ps)
	return ps
}
