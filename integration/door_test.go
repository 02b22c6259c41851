package integration

import (
	"testing"
)

// O_TMPFILE is refused with EOPNOTSUPP (an unnamed file would be written
// outside every staged handle), and programs that use it fall back to named
// temporary files; statx answers come from the gated GETATTR path.
func TestTmpfileRefusedStatxAnswered(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n", "notes/a.txt": "a\n"}).Mount()
	r := runCmd(e.WS, nil, "python3", "-c", `
import os, errno, tempfile
try:
    os.open("notes", os.O_TMPFILE | os.O_WRONLY, 0o600)
    print("tmpfile-opened")
except OSError as e:
    print("tmpfile", "EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else errno.errorcode[e.errno])
with tempfile.NamedTemporaryFile(dir="notes") as f:
    f.write(b"x"); f.flush()
    print("named-ok")
`)
	expectOK(t, "python3 O_TMPFILE probe", r)
	if r.Stdout != "tmpfile EOPNOTSUPP\nnamed-ok\n" {
		t.Fatalf("want O_TMPFILE refused with EOPNOTSUPP and a named temporary file working, got %q", r.Stdout)
	}
	// stat(1) asks with statx: sizes and modes come back as GETATTR gives them.
	r = runCmd(e.WS, nil, "stat", "-c", "%s %A", "MEMORY.md", "notes/a.txt")
	expectOK(t, "stat", r)
	if r.Stdout != "2 -rw-r--r--\n2 -rw-r--r--\n" {
		t.Fatalf("stat: %q", r.Stdout)
	}
}
