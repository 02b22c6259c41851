package integration

import (
	"strings"
	"testing"
)

// A guarded commit replaces the backing file by a rename; the file keeps
// the inode number the kernel knew: fstat on a descriptor held across the
// commit and stat of the path agree, before and after a rename (OpenClaw's
// staged writes check exactly this, and give up otherwise).
func TestAgentuxInodeStableAcrossCommit(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n", "memory/keep.md": "k\n"}).Mount()
	script := `
import os, sys
def same(what, fd, p):
    a, b = os.fstat(fd).st_ino, os.lstat(p).st_ino
    print(what, "same" if a == b else "DIFFERENT fstat=%d stat=%d" % (a, b))
tmp = "memory/.stage.tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b"# Notes\nhello\n")
same("before fsync", fd, tmp)
os.fsync(fd)
same("after fsync", fd, tmp)
os.rename(tmp, "memory/notes.md")
same("after rename", fd, "memory/notes.md")
os.write(fd, b"more\n")
os.fsync(fd)
same("after a second commit", fd, "memory/notes.md")
os.close(fd)
fd = os.open("MEMORY.md", os.O_WRONLY | os.O_APPEND)
before = os.lstat("MEMORY.md").st_ino
os.write(fd, b"more\n")
os.close(fd)
print("MEMORY.md", "same" if os.lstat("MEMORY.md").st_ino == before else "DIFFERENT")
`
	r := e.ShT("USER", "agent", `"$PY" -c '`+script+`'`)
	expectOK(t, "staged write", r)
	if strings.Contains(r.Stdout, "DIFFERENT") || strings.Count(r.Stdout, "same") != 5 {
		t.Fatalf("inode numbers across commits:\n%s", r.Stdout)
	}
	if got := e.Read("memory/notes.md"); got != "# Notes\nhello\nmore\n" {
		t.Fatalf("memory/notes.md = %q", got)
	}
	if d := e.index().denials("agent"); len(d) > 0 {
		t.Fatalf("refusals:%s", describe(d))
	}
}
