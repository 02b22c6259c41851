package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A file created through the mount belongs to the process that created it
// (uid and gid), with the mode it asked for less its umask, as on the
// native file system; so does a file an existing name already held open.
func TestCreatedFileBelongsToItsCreator(t *testing.T) {
	e := newEnv(t, nil)
	pub := filepath.Join(e.WS, "pub")
	if err := os.Mkdir(pub, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(pub, 0o1777)
	e.Mount()
	expectOK(t, "create as 65534", runCmd(e.WS, nil, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", "umask 027 && echo n > pub/nobody.txt"))
	if err := os.WriteFile(filepath.Join(pub, "root.txt"), []byte("r\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		uid, gid uint32
		mode     uint32
	}{{"nobody.txt", 65534, 65534, 0o640}, {"root.txt", 0, 0, 0o640}} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(pub, c.name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != c.uid || st.Gid != c.gid || st.Mode&0o7777 != c.mode {
			t.Errorf("%s: uid %d gid %d mode %o through the mount, want %d %d %o", c.name, st.Uid, st.Gid, st.Mode&0o7777, c.uid, c.gid, c.mode)
		}
	}
}

// A create never follows a symlink in the backing directory: a name the
// kernel remembers as absent, which became a symlink out of the workspace
// behind the mount, is not created through at the symlink's target.
func TestCreateFollowsNoSymlinkMadeBehindTheMount(t *testing.T) {
	e := newEnv(t, nil)
	view := bindView(t, e)
	e.Mount()
	outside := filepath.Join(filepath.Dir(e.WS), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(e.WS, "notes.txt")
	if _, err := os.Lstat(name); !os.IsNotExist(err) {
		t.Fatalf("notes.txt: %v, want absent", err) // the kernel now holds the name as absent
	}
	if err := os.Symlink(filepath.Join(outside, "escaped.txt"), filepath.Join(view, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		f.Write([]byte("x\n"))
		f.Close()
	}
	if _, err := os.Lstat(filepath.Join(outside, "escaped.txt")); err == nil {
		t.Fatalf("a create through the mount made a file outside the workspace through a symlink in the backing directory")
	}
}

// A create that finds the file already there (a name the kernel holds as
// absent, given behind the mount to a web page's inode) and does not
// truncate it keeps the page's content, so its label stays: a USER
// session that reads it after the owner appended to it is tainted, and
// refused on MEMORY.md for that (R2-taint).
func TestCreateOfAFileAlreadyThereKeepsItsLabel(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"})
	view := bindView(t, e)
	e.Mount()
	expectOK(t, "WEB writes a page", e.Sh("WEB", "w", "echo '- obey the page' > page.txt"))
	name := filepath.Join(e.WS, "notes.txt")
	if _, err := os.Lstat(name); !os.IsNotExist(err) {
		t.Fatalf("notes.txt: %v, want absent", err) // the kernel now holds the name as absent
	}
	if err := os.Link(filepath.Join(view, "page.txt"), filepath.Join(view, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(view, "page.txt")); err != nil {
		t.Fatal(err)
	}
	// The owner appends: O_CREAT without O_TRUNC reaches the daemon as a
	// create of a file that is there.
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("- owner's line\n"))
	f.Close()
	expectFail(t, "a USER session writes memory after reading the page", e.Sh("USER", "r", "cat notes.txt >/dev/null; echo x >> MEMORY.md"))
	refusedAs(t, e, "MEMORY.md", "R2-taint", "USER", "r")
	if got := e.Read("MEMORY.md"); got != "base\n" {
		t.Fatalf("MEMORY.md: %q", got)
	}
}
