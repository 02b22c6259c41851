package integration

// A shell that was in the workspace when it was mounted (cd ~/agent;
// aerfs mount ~/agent) still has the backing directory beneath the mount
// as its working directory, and what it opens relative to it is the
// backing directory's, never seen by aerfs. A session started from there
// must not start there: aerfs run resolves its working directory again by
// path (through the mount), in every sandbox mode, and refuses to start a
// session that would inherit a descriptor of a file or directory beneath
// the backing directory.

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestRunFromTheBackingDirectory(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "- remember milk\n"})
	sh := exec.Command("sh", "-c", `read go
"$AERFS" run --sandbox=off --principal WEB --session w1 -- sh -c 'pwd; echo "- evil, unconfined" >> MEMORY.md; echo "w1 rc=$?"'
echo "w1 run=$?"
"$AERFS" run --principal WEB --session w2 -- sh -c 'echo "- evil, confined" >> MEMORY.md; echo "w2 rc=$?"'
echo "w2 run=$?"
"$AERFS" run --sandbox=off --principal WEB --session w3 -- sh -c 'echo "- evil, through the shell redirection"' >> MEMORY.md
echo "w3 run=$?"
exec 3< .
"$AERFS" run --sandbox=off --principal WEB --session w4 -- sh -c 'echo "- evil, through a directory descriptor" >> /proc/self/fd/3/MEMORY.md; echo "w4 rc=$?"'
echo "w4 run=$?"
`)
	sh.Dir = e.WS // before the mount: the backing directory
	sh.Env = append(os.Environ(), "AERFS="+aerfsBin)
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	sh.Stdout, sh.Stderr = &out, &errb
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer sh.Process.Kill()
	e.Mount()
	before := e.Read("MEMORY.md")
	in.Write([]byte("go\n"))
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	select {
	case <-done:
	case <-time.After(cmdTimeout):
		t.Fatalf("the shell did not finish: %s\n%s", out.String(), errb.String())
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	if got := e.Read("MEMORY.md"); got != before {
		t.Errorf("a WEB session started from the backing directory changed MEMORY.md: %q", got)
	}
	// The sessions whose working directory was resolved again wrote
	// through the mount, and aerfs refused them.
	for _, s := range []string{"w1", "w2"} {
		refused := false
		for _, le := range e.Denials("MEMORY.md") {
			refused = refused || le.Record.Meta.Session == s && le.Record.Meta.Rule == "R3-principal"
		}
		if !refused {
			t.Errorf("session %s: its write was not refused by aerfs with R3-principal:%s", s, describe(e.Denials("MEMORY.md")))
		}
	}
	if !strings.Contains(out.String(), "w1 rc=") || strings.Contains(out.String(), "w1 rc=0") {
		t.Errorf("session w1 did not run, or its write succeeded")
	}
	// The descriptors of the backing directory are refused before any
	// session starts.
	for _, s := range []string{"w3", "w4"} {
		if !strings.Contains(out.String(), s+" run=125") {
			t.Errorf("aerfs run for %s with a descriptor beneath the backing directory: want exit 125", s)
		}
	}
	if strings.Contains(out.String(), "w4 rc=") {
		t.Errorf("session w4 ran with a descriptor of the backing directory")
	}
	if n := strings.Count(errb.String(), "aerfs: descriptor "); n != 2 || !strings.Contains(errb.String(), "in the directory beneath the aerfs mount") {
		t.Errorf("want two aerfs: errors naming the descriptor beneath the backing directory, got %d:\n%s", n, errb.String())
	}
}
