package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Content that reaches guarded names by a side door: a descriptor opened
// before a rename, an exchange, a symlink, an extended attribute, an
// import, a file name.

// A plain file is written through kernel passthrough: once open, its
// descriptor's writes never reach aerfs. A clean session opened draft.md,
// moved it onto CLAUDE.md, read a WEB page and wrote it through the
// descriptor it still held: the bytes landed in CLAUDE.md with no commit
// decision. A file open for writing through a plain handle takes no
// guarded name (rename, link or exchange), whoever asks: RW-open-writer.
func TestLabelFlowOpenWriterOntoGuardedName(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent, "CLAUDE.md": "# project\n"}).Mount()
	expectOK(t, "a WEB session writes a page", e.Sh("WEB", "w1", "echo INJECTED-VIA-OLDFD > page.txt"))
	r := e.Sh("USER", "u1", `exec 3>draft.md; echo "# notes" >&3; mv draft.md CLAUDE.md; x=$(cat page.txt); echo "$x" >&3; exec 3>&-`)
	if strings.Contains(e.Read("CLAUDE.md"), "INJECTED") {
		bugErrorf(t, "WEB content reached CLAUDE.md through a descriptor opened before the rename: %s", r)
	}
	if d := deniedWith(e.Log(), "CLAUDE.md", "RW-open-writer"); len(d) == 0 {
		bugErrorf(t, "no RW-open-writer refusal of the rename onto CLAUDE.md: %s", r)
	}
	// A hard link and an exchange are the same arrival.
	e.Sh("USER", "u2", `exec 3>draft2.md; ln draft2.md memory.md; x=$(cat page.txt); echo "$x" >&3; exec 3>&-`)
	if got, ok := e.TryRead("memory.md"); ok && strings.Contains(got, "INJECTED") {
		bugErrorf(t, "WEB content reached memory.md through a hard link of a file open for writing")
	}
	if d := deniedWith(e.Log(), "memory.md", "RW-open-writer"); len(d) == 0 {
		bugErrorf(t, "no RW-open-writer refusal of the link onto memory.md")
	}
	e.Sh("USER", "u3", `exec 3>draft3.md; python3 -c '
import ctypes, sys
ctypes.CDLL(None).renameat2(-100, b"MEMORY.md", -100, b"draft3.md", 2)'; x=$(cat page.txt); echo "$x" >&3; exec 3>&-`)
	if strings.Contains(e.Read("MEMORY.md"), "INJECTED") {
		bugErrorf(t, "WEB content reached MEMORY.md through an exchange with a file open for writing")
	}
	if d := deniedWith(e.Log(), "MEMORY.md", "RW-open-writer"); len(d) == 0 {
		bugErrorf(t, "no RW-open-writer refusal of the exchange with MEMORY.md")
	}
	// Written, closed, then moved: the ordinary way stays open.
	expectOK(t, "a clean session writes a file, closes it and moves it onto CLAUDE.md",
		e.Sh("USER", "u4", "echo '# rewritten' > d4.md && mv d4.md CLAUDE.md"))
	if got := e.Read("CLAUDE.md"); got != "# rewritten\n" {
		t.Errorf("CLAUDE.md holds %q after the move of a closed file", got)
	}
}

// exchangePy swaps two names with renameat2(RENAME_EXCHANGE).
const exchangePy = `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    sys.exit("exchange failed: " + os.strerror(ctypes.get_errno()))
`

// An agent's own content (inform) reaches a control name only through the
// owner's review: a plain rename of it onto Makefile is quarantined. An
// exchange (renameat2 RENAME_EXCHANGE) of Makefile with the agent's file,
// or of skills/ with the agent's directory, landed it as configuration.
// An exchange is two renames: every file it brings under a control name
// asks the act gate, both ways, all or nothing.
func TestLabelFlowExchangeActGate(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent, "Makefile": "all:\n\t@echo clean\n",
		"skills/notes/SKILL.md": "owner skill\n"}).Mount()
	py := filepath.Join(t.TempDir(), "xchg.py")
	if err := os.WriteFile(py, []byte(exchangePy), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := func(script string) Result {
		return runCmd(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--agent", "claude-code", "--principal", "USER",
			"--session", "ag", "--", "sh", "-c", script)
	}
	expectOK(t, "the agent writes a makefile", agent("printf 'all:\\n\\t@echo AGENT\\n' > mk.txt"))
	r := agent("python3 " + py + " Makefile mk.txt")
	if strings.Contains(e.Read("Makefile"), "AGENT") {
		bugErrorf(t, "an agent's file became Makefile by an exchange: %s", r)
	}
	if !strings.Contains(e.Read("mk.txt"), "AGENT") {
		t.Errorf("the refused exchange moved mk.txt: %s", r)
	}
	if d := deniedWith(e.Log(), "Makefile", "AU3-control-quarantine"); len(d) == 0 {
		bugErrorf(t, "no AU3-control-quarantine refusal of Makefile:%s", describe(recordsFor(e.Log(), "", "", "Makefile")))
	}
	expectOK(t, "the agent stages a skill", agent("mkdir -p stage/notes && echo AGENT-SKILL > stage/notes/SKILL.md"))
	r = agent("python3 " + py + " skills stage")
	if strings.Contains(e.Read("skills/notes/SKILL.md"), "AGENT") {
		bugErrorf(t, "an agent's skill became skills/notes/SKILL.md by an exchange of directories: %s", r)
	}
	if !strings.Contains(e.Read("stage/notes/SKILL.md"), "AGENT") {
		t.Errorf("the refused exchange moved stage/: %s", r)
	}
	if d := deniedWith(e.Log(), "skills/notes/SKILL.md", "AU3-control-quarantine"); len(d) == 0 {
		bugErrorf(t, "no AU3-control-quarantine refusal of skills/notes/SKILL.md:%s", describe(recordsFor(e.Log(), "", "", "skills/notes/SKILL.md")))
	}
	// The owner's own exchange of its content goes through.
	expectOK(t, "the owner writes a makefile", e.Owner("printf 'all:\\n\\t@echo OWNER\\n' > own.mk"))
	expectOK(t, "the owner exchanges Makefile", e.Owner("python3 "+py+" Makefile own.mk"))
	if !strings.Contains(e.Read("Makefile"), "OWNER") {
		t.Errorf("the owner's exchange did not land: %q", e.Read("Makefile"))
	}
}

// A WEB session cannot make proj/Makefile (control at any depth), but it
// could make node_modules/p/Makefile (excluded) and a symlink proj ->
// node_modules/p at a plain name: the owner's make -C proj ran it. Nor
// may it leave run.sh -> a script it wrote outside the mount, which the
// owner's ./run.sh ran with no gate seeing the exec. A symlink an
// untrusted or tainted session made is not followed out of the policy's
// sight: RX-symlink-escape.
func TestLabelFlowSymlinkEscape(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	out := t.TempDir()
	marker := filepath.Join(out, "marker")
	e.Sh("WEB", "w1", "mkdir -p node_modules/p && printf 'all:\\n\\t@touch "+marker+"-make\\n' > node_modules/p/Makefile && ln -s node_modules/p proj")
	e.Sh("WEB", "w1", "printf '#!/bin/sh\\ntouch "+marker+"-exec\\n' > "+out+"/x.sh && chmod +x "+out+"/x.sh && ln -s "+out+"/x.sh run.sh")
	r := e.Owner("make -s -C proj; ./run.sh; sh run.sh")
	if fileExists(marker + "-make") {
		bugErrorf(t, "the owner's make ran a WEB Makefile through the symlink proj -> node_modules/p: %s", r)
	}
	if fileExists(marker + "-exec") {
		bugErrorf(t, "the owner ran a WEB script outside the mount through the symlink run.sh: %s", r)
	}
	for _, p := range []string{"proj", "run.sh"} {
		if d := deniedWith(e.Log(), p, "RX-symlink-escape"); len(d) == 0 {
			bugErrorf(t, "no RX-symlink-escape refusal of %s:%s", p, describe(recordsFor(e.Log(), "", "", p)))
		}
	}
	// A clean session's links, and links that stay in sight, are followed.
	expectOK(t, "a WEB session links within node_modules", e.Sh("WEB", "w1",
		"mkdir -p node_modules/q/bin && echo x > node_modules/q/bin/t && ln -s q/bin/t node_modules/t && cat node_modules/t"))
	expectOK(t, "a clean session links outside", e.Sh("USER", "u1", "ln -s "+out+" outlink && ls outlink/"))
}

// A WEB session stored text in a user attribute of a plain file; a clean
// session read it with getfattr, untainted, and wrote it into MEMORY.md.
// Reading extended attributes (a value, the list of names) lets the
// file's label flow into the reader as reading the file does.
func TestLabelFlowXattrRead(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent, "notes.txt": "clean\n"}).Mount()
	if r := e.Sh("WEB", "w1", "setfattr -n user.note -v INJECTED-VIA-XATTR notes.txt"); r.Code != 0 {
		t.Fatalf("setfattr (the backing file system must keep user attributes): %s", r)
	}
	r := e.Sh("USER", "u1", `v=$(getfattr --only-values -n user.note notes.txt); echo "- $v" >> MEMORY.md`)
	if strings.Contains(e.Read("MEMORY.md"), "INJECTED") {
		bugErrorf(t, "a user attribute written by WEB reached MEMORY.md through a clean session: %s", r)
	}
	if d := deniedWith(e.Log(), "MEMORY.md", "R2-taint"); len(d) == 0 {
		bugErrorf(t, "no R2-taint refusal of MEMORY.md after the attribute was read:%s", describe(recordsFor(e.Log(), "", "", "MEMORY.md")))
	}
	r = e.Sh("USER", "u2", `getfattr -d notes.txt > /dev/null; echo "- listed" >> MEMORY.md`)
	if strings.Contains(e.Read("MEMORY.md"), "listed") {
		bugErrorf(t, "a session that listed a WEB file's attributes changed MEMORY.md: %s", r)
	}
	// The owner's own attributes stay readable to clean sessions.
	expectOK(t, "the owner sets an attribute", e.Owner("echo x > own.txt && setfattr -n user.k -v v own.txt"))
	expectOK(t, "a clean session reads it and writes memory", e.Sh("USER", "u3", `getfattr -n user.k own.txt >/dev/null && echo "- ok" >> MEMORY.md`))
}

// WEB-written code ran as the owner when an interpreter loaded it by
// import or source from a clean program: python3 main.py importing
// helper.py, python3 -m helper, sh main.sh sourcing lib.sh. An
// interpreter's read of a file with its own language's source extension
// runs it: the act gate decides it as an exec (AU3-exec-none).
func TestLabelFlowInterpreterImport(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	out := t.TempDir()
	expectOK(t, "a WEB session writes a module and a shell library", e.Sh("WEB", "w1",
		"echo 'open(\""+out+"/py\",\"w\").write(\"x\")' > helper.py && echo 'touch "+out+"/sh' > lib.sh"))
	expectOK(t, "the owner writes its programs", e.Owner("echo 'import helper' > main.py && echo '. ./lib.sh' > main.sh"))
	r := e.Owner("python3 main.py; python3 -m helper; sh main.sh")
	if fileExists(filepath.Join(out, "py")) {
		bugErrorf(t, "the owner's python3 ran a WEB module by import: %s", r)
	}
	if fileExists(filepath.Join(out, "sh")) {
		bugErrorf(t, "the owner's sh ran a WEB shell library by source: %s", r)
	}
	for _, p := range []string{"helper.py", "lib.sh"} {
		if d := deniedWith(e.Log(), p, "AU3-exec-none"); len(d) == 0 {
			bugErrorf(t, "no AU3-exec-none refusal of %s:%s", p, describe(recordsFor(e.Log(), "", "", p)))
		}
	}
	// The owner's own modules import, and a WEB data file is read as data.
	expectOK(t, "the owner imports its own module", e.Owner("echo 'X = 1' > own.py && python3 -c 'import own'"))
	expectOK(t, "a WEB session writes data", e.Sh("WEB", "w1", "echo 1 > data.txt"))
	expectOK(t, "the owner's python reads WEB data", e.Owner("python3 -c 'open(\"data.txt\").read()'"))
}
