package integration

import (
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
