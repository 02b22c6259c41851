package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// Content of class none does not run through an interpreter by an indirect
// route either: a library a Tcl or awk program sources (every -f of awk),
// a symlink of the owner's to the file, a descriptor named through
// /dev/fd, a runner module given the file (python3 -m cProfile). Each is
// refused AU3-exec-none (op interpret), and the code never runs.
func TestInterpreterIndirectRoutes(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	out := t.TempDir()
	mark := func(n string) string { return filepath.Join(out, n) }
	expectOK(t, "a WEB session writes programs", e.Sh("WEB", "w1", `
printf 'set f [open `+mark("tcl")+` w]; puts $f ran; close $f\n' > lib.tcl
printf 'BEGIN { print "ran" > "`+mark("awk")+`" }\n' > lib.awk
printf 'echo ran > `+mark("symlink")+`\n' > impl
printf 'echo ran > `+mark("devfd")+`\n' > devfd
printf 'open("`+mark("cprofile")+`","w").write("ran")\n' > prof`))
	expectOK(t, "the owner's programs and link", e.Owner(`printf 'source lib.tcl\n' > main.tcl && printf 'BEGIN { }\n' > main.awk && ln -s impl run`))
	runs := map[string]string{
		"tcl":      "tclsh main.tcl",
		"awk":      "awk -f main.awk -f lib.awk </dev/null",
		"symlink":  "sh run",
		"devfd":    "sh /dev/fd/3 3<devfd",
		"cprofile": "python3 -m cProfile prof",
	}
	files := map[string]string{"tcl": "lib.tcl", "awk": "lib.awk", "symlink": "impl", "devfd": "devfd", "cprofile": "prof"}
	for name, cmd := range runs {
		r := e.Owner(cmd)
		if fileExists(mark(name)) {
			bugErrorf(t, "%s: the owner ran WEB code (%s): %s", name, cmd, r)
		}
		li := e.Log()
		if d := deniedWith(li, files[name], "AU3-exec-none"); len(d) == 0 {
			bugErrorf(t, "%s: no AU3-exec-none refusal of %s:%s", name, files[name], describe(recordsFor(li, "", "", files[name])))
		}
	}
	// The same files read as data by programs that run nothing are read.
	if r := e.Owner("cat lib.tcl lib.awk run prof && awk '{print}' devfd"); r.Code != 0 || !strings.Contains(r.Stdout, "ran") {
		t.Errorf("reading the files as data was refused: %s", r)
	}
}

// git takes any directory holding HEAD (with objects/ and refs/) for a
// bare repository, and a .git file anywhere for a pointer to one: a
// session below the line plants neither (control class at any depth, rule
// R3-principal), so the owner's next git status there runs none of its
// configuration. HEAD inside a .git directory stays git's own.
func TestGitRepositoryLookalikesAreControl(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent, "src/main.c": "int main(){}\n"}).Mount()
	for rel, cmd := range map[string]string{
		"src/HEAD": "printf 'ref: refs/heads/main\\n' > src/HEAD",
		"src/.git": "printf 'gitdir: /tmp/elsewhere\\n' > src/.git",
	} {
		if r := e.Sh("WEB", "w1", cmd); r.Code == 0 {
			bugErrorf(t, "a WEB session wrote %s: %s", rel, r)
		}
		if d := deniedWith(e.Log(), rel, "R3-principal"); len(d) == 0 {
			bugErrorf(t, "no R3-principal refusal of %s:%s", rel, describe(recordsFor(e.Log(), "", "", rel)))
		}
		if fileExists(filepath.Join(e.WS, rel)) {
			bugErrorf(t, "%s exists after the refusal", rel)
		}
	}
	// A clean session's git works as before, HEAD and reflog included.
	expectOK(t, "a clean session's git", e.Sh("USER", "u1", "git init -q sub && cd sub && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && git checkout -q -b other && git log --oneline | wc -l"))
}
