package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Scripts started with AERFS_TEST_HOLD=P are held after their interpreter
// started and before it opens the script: the interpreter creates P-ready
// and waits for P-go. bash reads BASH_ENV, python imports sitecustomize
// before they open their program, so the window between the kernel's exec
// open of a script and the interpreter's read is as long as a test needs.
const (
	holdBash = `if [ -n "$AERFS_TEST_HOLD" ]; then : > "$AERFS_TEST_HOLD-ready"; i=0
while [ ! -e "$AERFS_TEST_HOLD-go" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; fi
`
	holdPython = `import os, time
p = os.environ.get("AERFS_TEST_HOLD")
if p:
    open(p + "-ready", "w").close()
    t = time.time()
    while not os.path.exists(p + "-go") and time.time() - t < 30:
        time.sleep(0.01)
`
)

// An owner token lets exactly one content run. The kernel's exec open of a
// script spends it; the interpreter the kernel then starts opens the script
// by name (python twice). What those opens find must be the content the
// token authorised: another file swapped in under the name, or the same
// file rewritten, is decided by the act gate as any interpreter read.
func TestAuthorityTokenExecThenSwap(t *testing.T) {
	e := newEnv(t, nil).Mount()
	hold := sharedTempDir(t)
	if err := os.WriteFile(filepath.Join(hold, "sitecustomize.py"), []byte(holdPython), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hold, "hold.sh"), []byte(holdBash), 0o644); err != nil {
		t.Fatal(err)
	}
	ran := func(m string) bool { return fileExists(filepath.Join(hold, "ran-"+m)) }
	bash := func(m string) string {
		return "#!/bin/bash\n: > " + filepath.Join(hold, "ran-"+m) + "\necho ran-" + m + "\n"
	}
	mkx := `python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_CREAT|os.O_WRONLY|os.O_TRUNC, 0o755); os.write(fd, sys.argv[2].encode()); os.close(fd)' `
	expectOK(t, "WEB writes three scripts", e.Sh("WEB", "web", mkx+"run.sh '"+bash("good")+"' && "+mkx+"alt.sh '"+bash("evil")+"' && "+
		mkx+"run.py \"#!/usr/bin/python3\nopen('"+filepath.Join(hold, "ran-py")+"', 'w').close()\n\""))
	exchange := `python3 -c 'import ctypes,sys; sys.exit(ctypes.CDLL(None).renameat2(-100, b"run.sh", -100, b"alt.sh", 2) != 0)'`

	// run authorizes name for exec and starts it as the owner; while its
	// interpreter is held between the exec open and its read, the WEB
	// session runs between.
	run := func(step, name, between string) Result {
		t.Helper()
		expectOK(t, step+": owner authorizes exec of "+name, e.aerfsOwner("authorize", name, "--for", "exec"))
		p := filepath.Join(hold, step)
		done := make(chan Result, 1)
		go func() {
			done <- e.Owner("AERFS_TEST_HOLD=" + p + " BASH_ENV=" + hold + "/hold.sh PYTHONPATH=" + hold + " ./" + name)
		}()
		deadline := time.Now().Add(60 * time.Second)
		for !fileExists(p + "-ready") {
			select {
			case r := <-done:
				t.Fatalf("%s: the script ended before its interpreter read it: %s", step, r)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the interpreter never started", step)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if between != "" {
			expectOK(t, step+": the WEB session changes run.sh", e.Sh("WEB", "web", between))
		}
		if err := os.WriteFile(p+"-go", nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return <-done
	}
	refusals := func(name string) int {
		n := 0
		for _, le := range recordsFor(e.Log(), "verdict", "interpret", name) {
			if le.Record.Meta.Verdict == "deny" && le.Record.Meta.Rule == "AU3-exec-none" {
				n++
			}
		}
		return n
	}

	// The authorised content runs, however often its interpreter opens it.
	if r := run("bash", "run.sh", ""); r.Code != 0 || !ran("good") {
		bugErrorf(t, "the authorised bash script did not run: %s", r)
	}
	if r := run("python", "run.py", ""); r.Code != 0 || !ran("py") {
		bugErrorf(t, "the authorised python script (opened twice by python) did not run: %s", r)
	}
	if n := refusals("run.sh") + refusals("run.py"); n != 0 {
		bugErrorf(t, "the authorised scripts' interpreter reads were refused %d times", n)
	}

	// Another file under the name: refused as an interpreter read of none
	// content.
	if r := run("exchange", "run.sh", exchange); ran("evil") || strings.Contains(r.Stdout, "ran-evil") {
		bugErrorf(t, "a token for run.sh's content let the WEB session's other file run: %s", r)
	}
	swapped := refusals("run.sh")
	if swapped == 0 {
		bugErrorf(t, "no AU3-exec-none refusal (op interpret) of the file swapped under run.sh:%s", describe(recordsFor(e.Log(), "", "", "run.sh")))
	}

	// The same file rewritten in place: refused too.
	expectOK(t, "the WEB session swaps the files back", e.Sh("WEB", "web", exchange))
	if r := run("rewrite", "run.sh", mkx+"run.sh '"+bash("evil")+"'"); ran("evil") || strings.Contains(r.Stdout, "ran-evil") {
		bugErrorf(t, "a token for run.sh's content let the content the WEB session rewrote run: %s", r)
	}
	if refusals("run.sh") == swapped {
		bugErrorf(t, "no AU3-exec-none refusal (op interpret) of run.sh rewritten:%s", describe(recordsFor(e.Log(), "", "", "run.sh")))
	}
}
