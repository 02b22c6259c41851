package integration

import (
	"strings"
	"testing"
)

// The kernel hands the file system one name at a time, so a chain of
// directories may be far deeper than PATH_MAX below the mount. Every
// operation on a plain path at the bottom of a 5,000-byte chain works as
// on the native file system: mkdir, create, write, stat, chmod, utime,
// truncate, symlink, readlink, link, rename, listing, unlink, rmdir.
func TestLongPathsBelowTheMount(t *testing.T) {
	e := newEnv(t, nil).Mount()
	script := `
import os, sys
name = "d" * 250
depth = 0
os.mkdir("deep"); os.chdir("deep")
while len(os.getcwd()) < 5200:
    os.mkdir(name); os.chdir(name); depth += 1
with open("f", "w") as f:
    f.write("hello\n")
assert open("f").read() == "hello\n"
os.chmod("f", 0o600)
assert os.stat("f").st_mode & 0o777 == 0o600
os.utime("f", (1000000000, 1000000000))
assert os.stat("f").st_mtime == 1000000000
os.truncate("f", 2)
assert open("f").read() == "he"
os.symlink("f", "l")
assert os.readlink("l") == "f"
os.link("f", "h")
assert os.stat("h").st_nlink == 2
os.rename("h", "g")
os.mkfifo("p")
assert sorted(os.listdir(".")) == ["f", "g", "l", "p"], os.listdir(".")
for n in ["f", "g", "l", "p"]:
    os.unlink(n)
os.mkdir("sub"); os.rmdir("sub")
for i in range(depth):
    os.chdir("..")
    os.rmdir(name)
print("ok", depth)
`
	r := e.Owner("python3 -c '" + strings.ReplaceAll(script, "'", `'"'"'`) + "'")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "ok") {
		t.Fatalf("operations at the bottom of a deep chain: %s", r)
	}
}
