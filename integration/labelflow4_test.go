package integration

import (
	"os"
	"os/exec"
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
	ownerRunsNone(t, e, runs, files, mark)
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

// A WEB session's file does not run in the owner's programs through the
// routes that name it indirectly either: a module node preloads (-r,
// --require=), a file a shell's -c string sources through its arguments
// (`bash -c '. ./$0' notes.txt`), a sed script (sed runs shell commands:
// its e command), and a library the loader maps under a name that is no
// library's (LD_PRELOAD=preload.bin): the loader is known by its code, not
// by the name it opens. Each is refused AU3-exec-none and never runs; the
// same files read as data are read. The program is found past options
// that take no value (bash -e, python3 -I), in
// clusters (sed -nf, awk -fFILE) and in the environment (NODE_OPTIONS,
// BASH_ENV); a loader whose file has an old name (ld-2.31.so) is known
// by where it is mapped.
func TestInterpreterProgramsNamedIndirectly(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	out := t.TempDir()
	mark := func(n string) string { return filepath.Join(out, n) }
	src := filepath.Join(out, "ctor.c")
	so := filepath.Join(out, "ctor.so")
	if err := os.WriteFile(src, []byte(`#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void ran(void) {
	const char *m = getenv("MARK");
	FILE *f = m ? fopen(m, "w") : NULL;
	if (f) { fputs("ran\n", f); fclose(f); }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -shared: %v\n%s", err, b)
	}
	expectOK(t, "a WEB session writes programs under data names", e.Sh("WEB", "w1", `
printf 'require("fs").writeFileSync("`+mark("node-require")+`", "ran")\n' > webmod.txt
printf 'require("fs").writeFileSync("`+mark("node-require-eq")+`", "ran")\n' > webmod2.txt
printf 'echo ran > `+mark("dot-var")+`\n' > notes.txt
printf '1e echo ran > `+mark("sed")+`\n' > web.sed
printf '1e echo ran > `+mark("sed-nf")+`\n' > web2.sed
printf 'echo ran > `+mark("bash-e")+`\n' > web1.txt
printf 'open("`+mark("python-I")+`", "w").write("ran")\n' > web2.txt
printf 'BEGIN { print "ran" > "`+mark("awk-f")+`" }\n' > web.awk
printf 'require("fs").writeFileSync("`+mark("node-options")+`", "ran")\n' > webmod3.txt
printf 'echo ran > `+mark("bash-env")+`\n' > web4.txt
printf 'open(my $f, ">", "`+mark("perl-I")+`"); print $f "ran\\n";\n' > web5.txt
printf 'echo ran > `+mark("bash-c-l")+`\n' > web6.txt
printf 'echo ran > `+mark("ldso-bash")+`\n' > web7.txt
mkdir -p bin && printf 'echo ran > `+mark("path-search")+`\n' > bin/tool
printf 'echo ran > `+mark("sh-set")+`\n' > web8.txt
printf 'open(my $f, ">", "`+mark("perl-M")+`"); print $f "ran\\n";\n' > web9.txt
printf 'echo ran > `+mark("redir-dot")+`\n' > web10.txt
printf 'echo ran > `+mark("cmdsubst")+`\n' > web11.txt
cp `+so+` preload.bin
cp `+so+` preload2.bin
cp `+so+` preload3.bin`))
	// A program whose loader's file is named as glibc 2.33 and older name
	// theirs (ld-2.31.so): the loader is known by where it is mapped.
	ld := filepath.Join(out, "ld-2.31.so")
	if b, err := exec.Command("cp", "/lib64/ld-linux-x86-64.so.2", ld).CombinedOutput(); err != nil {
		t.Fatalf("cp ld.so: %v\n%s", err, b)
	}
	prog := filepath.Join(out, "clean")
	if err := os.WriteFile(prog+".c", []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-o", prog, prog+".c", "-Wl,--dynamic-linker="+ld).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	runs := map[string]string{
		"node-require":    "node -r ./webmod.txt -e 0",
		"node-require-eq": "node --require=./webmod2.txt -e 0",
		"dot-var":         `f=notes.txt; bash -c '. ./$0' "$f"`,
		"sed":             "echo x | sed -f web.sed",
		"ld-preload":      "MARK=" + mark("ld-preload") + ` LD_PRELOAD="$PWD/preload.bin" /bin/true`,
		"old-loader":      "MARK=" + mark("old-loader") + ` LD_PRELOAD="$PWD/preload2.bin" ` + prog,
		"sed-nf":          "echo x | sed -nf web2.sed",
		"bash-e":          "bash -e web1.txt",
		"python-I":        "python3 -I web2.txt",
		"awk-f":           "awk -fweb.awk </dev/null",
		"node-options":    `NODE_OPTIONS="--require ./webmod3.txt" node -e 0`,
		"bash-env":        "BASH_ENV=./web4.txt bash -c true",
		"perl-I":          "perl -I lib web5.txt",
		"bash-c-l":        "bash -c -l '. ./web6.txt'",
		"ldso-bash":       "/lib64/ld-linux-x86-64.so.2 /bin/bash web7.txt",
		"path-search":     `PATH="$PWD/bin:$PATH" bash tool`,
		"sh-set":          `sh -c 'set -- ./web8.txt; . "$1"'`,
		"perl-M":          "perl -MData::Dumper web9.txt",
		"redir-dot":       `bash -c '2>/dev/null . ./web10.txt'`,
		"cmdsubst":        `bash -c 'out=$(. ./web11.txt)'`,
		"ldso-dlopen":     "MARK=" + mark("ldso-dlopen") + ` /lib64/ld-linux-x86-64.so.2 "$(python3 -c 'import sys; print(sys.executable)')" -c 'import ctypes; ctypes.CDLL("./preload3.bin")'`,
	}
	files := map[string]string{"node-require": "webmod.txt", "node-require-eq": "webmod2.txt", "dot-var": "notes.txt", "sed": "web.sed", "ld-preload": "preload.bin",
		"old-loader": "preload2.bin", "sed-nf": "web2.sed", "bash-e": "web1.txt", "python-I": "web2.txt", "awk-f": "web.awk",
		"node-options": "webmod3.txt", "bash-env": "web4.txt", "perl-I": "web5.txt", "bash-c-l": "web6.txt", "ldso-bash": "web7.txt",
		"path-search": "bin/tool", "sh-set": "web8.txt", "perl-M": "web9.txt", "ldso-dlopen": "preload3.bin",
		"redir-dot": "web10.txt", "cmdsubst": "web11.txt"}
	ownerRunsNone(t, e, runs, files, mark)
	if r := e.Owner(`cat webmod.txt notes.txt web.sed preload.bin >/dev/null && sed -n 1p notes.txt && node -e 'require("fs").readFileSync("webmod.txt")' && bash -c 'wc -l < "$0"' notes.txt`); r.Code != 0 || !strings.Contains(r.Stdout, "ran") {
		t.Errorf("reading the files as data was refused: %s", r)
	}
}

// sed and awk read their input files as data: a WEB session's file given
// to the owner's own sed or awk program (-f) is read, not run; so does a
// shell whose -c string sources the owner's own file by a variable
// (source "$HOME/env.sh", as nvm's and cargo's setup lines do), and one
// that evals a command opening the page for a redirection, in the form
// Claude Code's Bash tool runs every command (its trailing \< /dev/null
// then feeds head nothing: what counts is that the shell's open of the
// page is not refused).
func TestTextToolsReadTheirInput(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	expectOK(t, "a WEB page", e.Sh("WEB", "w1", `printf 'line one\nline two\n' > page.txt`))
	expectOK(t, "the owner's programs", e.Owner(`printf 'p\n' > own.sed && printf '{ print }\n' > own.awk`))
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "env.sh"), []byte("X=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.Owner(`sed -n -f own.sed page.txt && awk -f own.awk page.txt && sed -n 1p page.txt && awk '{print}' page.txt &&
HOME=` + home + ` bash -c 'source "$HOME/env.sh"; head -1 < page.txt' && bash -c -l 'head -1 page.txt' &&
HOME=` + home + ` bash -c -l 'source "$HOME/env.sh" && eval "head -1 < page.txt" \< /dev/null'`)
	if r.Code != 0 || strings.Count(r.Stdout, "line one") != 6 {
		t.Fatalf("sed and awk reading a WEB page as input: %s", r)
	}
	if d := deniedWith(e.Log(), "page.txt", "AU3-exec-none"); len(d) > 0 {
		t.Fatalf("an input file was refused as a program:%s", describe(d))
	}
}

// ownerRunsNone has the owner run each command of runs, each of which
// would run a WEB session's file (files[name]) that leaves mark(name)
// when it runs: none may run, and each is refused AU3-exec-none.
func ownerRunsNone(t *testing.T, e *Env, runs, files map[string]string, mark func(string) string) {
	t.Helper()
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
}
