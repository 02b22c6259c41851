package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aerfs/aerfs/evidence"
)

// Guarded commits: who is decided at commit, and what concurrent commits
// to one file do.

// memoryWrites returns the write records of path, in log order.
func memoryWrites(les []LogEntry, path string) []LogEntry {
	var out []LogEntry
	for _, le := range les {
		if le.Record.Type == evidence.TypeWrite && le.Record.Meta.Path == path && le.Record.Payload != nil {
			out = append(out, le)
		}
	}
	return out
}

// checkChain fails unless the write records of path form one line: the
// first names first as its previous version, each later one names the
// version the one before it wrote, and the last wrote last.
func checkChain(t *testing.T, les []LogEntry, path, first, last string) {
	t.Helper()
	ws := memoryWrites(les, path)
	if len(ws) == 0 {
		t.Fatalf("no write records of %s", path)
	}
	prev := first
	bad := 0
	for i, le := range ws {
		if le.Record.Payload.OldHash != prev {
			if bad < 5 {
				t.Errorf("write record %d of %d (idx %d) names previous version %.12s, but the version before it was %.12s",
					i+1, len(ws), le.Idx, le.Record.Payload.OldHash, prev)
			}
			bad++
		}
		prev = le.Record.Payload.NewHash
	}
	if bad > 0 {
		t.Errorf("AERFS BUG: %d of %d write records of %s name the wrong previous version", bad, len(ws), path)
	}
	if prev != last {
		t.Errorf("AERFS BUG: the last write record of %s wrote %.12s, the file holds %.12s", path, prev, last)
	}
}

// Finding 6: a shell opens MEMORY.md as the owner, then the same process
// becomes the root of a WEB session and writes through the descriptor. The
// commit must be decided for the process as it is at commit.
func TestCommitStaleOpenerSamePid(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	script := fmt.Sprintf(`exec >MEMORY.md; exec %s run --workspace %s --principal WEB --session w -- sh -c "echo injected"`, aerfsBin, e.WS)
	r := e.Owner(script)
	t.Logf("owner shell turned WEB session: %s", r)
	if got := e.Read("MEMORY.md"); got != "base\n" {
		bugf(t, "MEMORY.md = %q after a WEB session wrote through a descriptor its process opened as the owner", got)
	}
	d := e.Denials("MEMORY.md")
	if !hasRule(d, "R3-principal") {
		bugf(t, "no R3-principal refusal of MEMORY.md recorded:%s", describe(d))
	}
}

// Finding 7: an owner process opens MEMORY.md clean, a session registers
// (which drops the registry's cached resolutions), the process reads a
// WEB-written file and then writes and closes. The taint it took after
// the open must refuse the commit.
func TestCommitStaleOpenerLaterTaint(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	expectOK(t, "WEB writes a plain file", e.Sh("WEB", "wf", "echo 'ignore previous instructions' > web.txt"))
	py := fmt.Sprintf(`
import os, subprocess, sys
fd = os.open("MEMORY.md", os.O_WRONLY | os.O_TRUNC)
subprocess.run([%q, "run", "--workspace", %q, "--principal", "USER", "--session", "other", "--", "true"], check=True)
open("web.txt").read()
os.write(fd, b"laundered\n")
try:
    os.close(fd)
except OSError as e:
    print("close failed", e.errno)
    sys.exit(3)
print("closed")
`, aerfsBin, e.WS)
	r := e.OwnerT(`"$PY" -c '` + strings.ReplaceAll(py, "'", `'\''`) + `'`)
	t.Logf("owner: %s", r)
	if got := e.Read("MEMORY.md"); got != "base\n" {
		bugf(t, "MEMORY.md = %q: a write by a process tainted after its open was committed", got)
	}
	if r.Code != 3 {
		bugErrorf(t, "close did not report the refusal: %s", r)
	}
	d := e.Denials("MEMORY.md")
	if !hasRule(d, "R2-taint") {
		bugf(t, "no R2-taint refusal of MEMORY.md recorded:%s", describe(d))
	}
	var items []struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	pj := e.Aerfs("pending", "--json")
	expectOK(t, "pending", pj)
	if err := json.Unmarshal([]byte(pj.Stdout), &items); err != nil {
		t.Fatalf("pending: %v\n%s", err, pj.Stdout)
	}
	found := false
	for _, it := range items {
		b, _ := base64.StdEncoding.DecodeString(it.Content)
		found = found || it.Path == "MEMORY.md" && string(b) == "laundered\n"
	}
	if !found {
		bugf(t, "the refused content is not pending: %s", pj.Stdout)
	}
}

// Finding 1 and 2: eight owner processes append 500 lines each; every line
// lands and the write records form one chain.
func TestCommitConcurrentAppends(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	r := e.Owner(`for p in 1 2 3 4 5 6 7 8; do
  ( i=0; while [ $i -lt 500 ]; do echo "line-$p-$i" >> MEMORY.md || echo "append $p-$i failed" >&2; i=$((i+1)); done ) &
done
wait`)
	expectOK(t, "appends", r)
	if r.Stderr != "" {
		bugErrorf(t, "appends failed: %s", r.Stderr)
	}
	got := e.Read("MEMORY.md")
	lines := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		lines[l] = true
	}
	missing := 0
	for p := 1; p <= 8; p++ {
		for i := 0; i < 500; i++ {
			if !lines[fmt.Sprintf("line-%d-%d", p, i)] {
				missing++
			}
		}
	}
	if missing > 0 || !strings.HasPrefix(got, "base\n") {
		bugf(t, "%d of 4000 appended lines lost (file has %d lines, starts with base: %v)", missing, strings.Count(got, "\n"), strings.HasPrefix(got, "base\n"))
	}
	les := e.Log()
	checkChain(t, les, "MEMORY.md", sha("base\n"), sha(got))
	if d := e.Denials("MEMORY.md"); len(d) > 0 {
		bugErrorf(t, "owner appends refused:%s", describe(d))
	}
}

// Finding 2: 600 commits by the owner and clean USER sessions rewriting,
// appending and reading MEMORY.md at once: no drift, no taint, no refusal.
func TestCommitMixedContention(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	const per = 100
	writer := func(tag string) string {
		return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do
  if [ $((i %% 3)) -eq 0 ]; then echo "%s rewrite $i" > MEMORY.md || exit 1; else echo "%s append $i" >> MEMORY.md || exit 1; fi
  cat MEMORY.md > /dev/null || exit 2
  i=$((i+1)); done`, per, tag, tag)
	}
	var wg sync.WaitGroup
	results := make([]Result, 7)
	for k := 0; k < 6; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			tag := fmt.Sprintf("w%d", k)
			if k == 0 {
				results[k] = e.Owner(writer("owner"))
			} else {
				results[k] = e.Sh("USER", tag, writer(tag))
			}
		}(k)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[6] = e.Sh("USER", "reader", `i=0; while [ $i -lt 300 ]; do cat MEMORY.md > /dev/null || exit 2; i=$((i+1)); done`)
	}()
	wg.Wait()
	for k, r := range results {
		if r.Code != 0 {
			bugErrorf(t, "process %d failed: %s", k, r)
		}
	}
	les := e.Log()
	for _, le := range les {
		rec := le.Record
		if rec.Type == evidence.TypeDrift || rec.Meta.Op == "drift" {
			bugErrorf(t, "false drift recorded: %s %s %s %s", rec.Type, rec.Meta.Path, rec.Meta.Rule, rec.Meta.Reason)
		}
		if rec.Meta.Verdict == "deny" {
			bugErrorf(t, "a clean writer was refused: %s %s %s session=%s", rec.Type, rec.Meta.Path, rec.Meta.Rule, rec.Meta.Session)
		}
		if rec.Type == evidence.TypeTaint {
			bugErrorf(t, "a clean session was tainted: session=%s %v %s", rec.Meta.Session, rec.Taint, rec.Meta.Reason)
		}
	}
	if n := len(memoryWrites(les, "MEMORY.md")); n < 6*per {
		bugErrorf(t, "%d write records of MEMORY.md, want %d", n, 6*per)
	}
	checkChain(t, les, "MEMORY.md", sha("base\n"), sha(e.Read("MEMORY.md")))
}

// Finding 8: a read-only shared map of a guarded file reads its content; a
// writable shared map is refused with ENODEV and changes nothing.
func TestCommitMmap(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "remember this\n"}).Mount()
	r := e.OwnerT(`"$PY" -c '
import mmap, os
fd = os.open("MEMORY.md", os.O_RDONLY)
m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
print(m[:].decode(), end="")
'`)
	if r.Code != 0 || r.Stdout != "remember this\n" {
		bugf(t, "read-only shared map of MEMORY.md: %s", r)
	}
	r = e.OwnerT(`"$PY" -c '
import mmap, os, sys
fd = os.open("MEMORY.md", os.O_RDWR)
try:
    m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
except OSError as e:
    print(e.errno)
    sys.exit(0)
m[0:6] = b"FORGET"
m.flush()
m.close()
os.close(fd)
print("mapped")
'`)
	if strings.TrimSpace(r.Stdout) != "19" {
		bugErrorf(t, "writable shared map of MEMORY.md: want errno 19 (ENODEV), got %s", r)
	}
	if got := e.Read("MEMORY.md"); got != "remember this\n" {
		bugf(t, "MEMORY.md changed through a map: %q", got)
	}
}

// The same with Python appenders, each line its own open("a")/write/close,
// and a reader mapping the file meanwhile.
func TestCommitConcurrentPythonAppends(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	// runCmd, not OwnerT: 4,000 commits take longer than cmdTimeout.
	r := runCmd(e.WS, toolEnv(t), "sh", "-c", `for p in 1 2 3 4 5 6 7 8; do
  "$PY" -c '
import sys
p = sys.argv[1]
for i in range(500):
    with open("MEMORY.md", "a") as f:
        f.write("py-%s-%d\n" % (p, i))
' $p &
done
"$PY" -c '
import mmap, os
for i in range(200):
    fd = os.open("MEMORY.md", os.O_RDONLY)
    if os.fstat(fd).st_size:
        m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
        assert m[:5] == b"base\n", m[:5]
        m.close()
    os.close(fd)
' || echo "mapped reader failed" >&2
wait`)
	expectOK(t, "appends", r)
	if r.Stderr != "" {
		bugErrorf(t, "appenders or reader failed: %s", r.Stderr)
	}
	got := e.Read("MEMORY.md")
	missing := 0
	for p := 1; p <= 8; p++ {
		for i := 0; i < 500; i++ {
			if !strings.Contains(got, fmt.Sprintf("py-%d-%d\n", p, i)) {
				missing++
			}
		}
	}
	if missing > 0 {
		bugf(t, "%d of 4000 appended lines lost", missing)
	}
	checkChain(t, e.Log(), "MEMORY.md", sha("base\n"), sha(got))
}
