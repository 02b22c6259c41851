package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// An unprivileged writer clears a file's set-user-ID and set-group-ID bits,
// as on any Linux filesystem — also when kernel passthrough serves the
// write and the daemon never sees it.
func TestWriteClearsSetIDBits(t *testing.T) {
	e := newEnv(t, map[string]string{"tool": "#!/bin/sh\n", "tool2": "#!/bin/sh\n"})
	for _, f := range []string{"tool", "tool2"} {
		p := filepath.Join(e.WS, f)
		os.Chown(p, 65534, 65534)
		os.Chmod(p, 0o6775)
	}
	os.Chmod(e.WS, 0o777)
	e.Mount()
	for name, script := range map[string]string{
		"tool":  "echo '# more' >> tool",
		"tool2": "truncate -s 3 tool2",
	} {
		r := runCmd(e.WS, nil, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
		expectOK(t, "unprivileged write to "+name, r)
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(e.WS, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("%s: mode %o after an unprivileged write: set-ID bits kept", name, st.Mode&0o7777)
		}
	}
	// Root keeps them (CAP_FSETID).
	expectOK(t, "chmod", e.Owner("chmod 4755 tool && stat -c %a tool"))
	r := e.Owner("echo '# root' >> tool; stat -c %a tool")
	expectOK(t, "root write", r)
	t.Logf("after root write: %s", r.Stdout)
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(e.WS, "tool"), &st)
	if st.Mode&syscall.S_ISUID == 0 {
		t.Errorf("root's write cleared the set-user-ID bit: mode %o", st.Mode&0o7777)
	}
}
