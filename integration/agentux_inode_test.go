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

// The number a committed file keeps is never given to another file: the
// replaced inode stays referenced while its number is in use.
func TestAgentuxInodeNotShared(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	for i := 0; i < 3; i++ {
		script := `rm -f memory/x.md; mkdir -p memory; printf 'v\n' > memory/x.md; printf 'w\n' >> memory/x.md; printf 'm\n' >> MEMORY.md
for n in 1 2 3 4 5 6 7 8 9 10; do printf p > plain$n; done
stat -c '%i %n' MEMORY.md memory/x.md plain* | sort -n | awk '{ if ($1 == last) print "SHARED " $2 " " name; last = $1; name = $2 }'
rm -f plain*`
		r := e.Owner(script)
		if r.Code != 0 || strings.Contains(r.Stdout, "SHARED") {
			t.Fatalf("round %d: %s", i, r)
		}
		r = e.Sh("USER", "agent", script)
		if r.Code != 0 || strings.Contains(r.Stdout, "SHARED") {
			t.Fatalf("round %d in a session: %s", i, r)
		}
	}
}
