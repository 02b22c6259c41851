package gate

import (
	"bufio"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/principal"
)

// # Execution through interpreters and the loader
//
// The kernel's exec open is one door of execution; an interpreter that
// reads a script (sh x, python3 x, . x, node x, perl x, ld.so x) and the
// loader that maps a shared library are others, and to the file system
// they are read opens. A read open of content below act is decided by the
// act gate like an exec open when the reader is an interpreter of the
// policy (policy.Interpreter) and its command line names the file as the
// program to run — the first argument that is not an option, the file of
// a shell's `. FILE` or `source FILE` —, when the file has a source
// extension of the interpreter's own language (an import: helper.py read
// by python, lib.sh by a shell), or when the file is a shared library
// (name *.so, *.so.N) or the reader is the dynamic loader, known by its
// code making the open (loaderOpens): LD_PRELOAD, a DT_NEEDED entry and
// dlopen open a library of any name. Other reads by interpreters are data
// reads.

// sourceExts are, by the name of an interpreter's program, the
// extensions of the files it runs when it reads them: a module imported
// (python's import, python -m, a .pth file, a cached .pyc; node's
// require), a library a shell sources (. lib.sh). Such a read runs the
// file whatever the command line says.
var sourceExts = []struct {
	prog string
	exts []string
}{
	{"python", []string{".py", ".pyc", ".pyw", ".pth"}},
	{"pypy", []string{".py", ".pyc", ".pyw", ".pth"}},
	{"node", []string{".js", ".mjs", ".cjs", ".ts", ".mts", ".cts"}},
	{"deno", []string{".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx"}},
	{"bun", []string{".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx"}},
	{"bash", []string{".sh", ".bash"}},
	{"dash", []string{".sh"}},
	{"zsh", []string{".sh", ".zsh"}},
	{"ksh", []string{".sh", ".ksh"}},
	{"mksh", []string{".sh", ".ksh", ".mksh"}},
	{"yash", []string{".sh"}},
	{"busybox", []string{".sh"}},
	{"fish", []string{".fish"}},
	{"sh", []string{".sh"}},
	{"perl", []string{".pl", ".pm"}},
	{"ruby", []string{".rb"}},
	{"php", []string{".php"}},
	{"lua", []string{".lua"}},
	{"tclsh", []string{".tcl", ".tm"}},
	{"wish", []string{".tcl", ".tm"}},
	{"awk", []string{".awk"}},
	{"gawk", []string{".awk"}},
	{"mawk", []string{".awk"}},
	{"Rscript", []string{".R", ".r"}},
}

// ownSource reports whether base has a source extension of the
// interpreter exe's own language.
func ownSource(exe, base string) bool {
	prog := path.Base(exe)
	for _, s := range sourceExts {
		if !strings.HasPrefix(prog, s.prog) {
			continue
		}
		for _, e := range s.exts {
			if strings.HasSuffix(base, e) {
				return true
			}
		}
		return false
	}
	return false
}

// interpOpts are the options of the common interpreters that take a
// value, which is not the program to run.
var interpOpts = map[string]bool{
	"-W": true, "-X": true, "-I": true, "-M": true, "-o": true, "+o": true, "-O": true, "+O": true,
	"--library-path": true, "--preload": true,
	"--audit": true, "--argv0": true, "--check-hash-based-pycs": true, "-d": true,
}

// preloads are the options whose value is code the interpreter runs before
// its program (node -r and --require, --import and --loader, ruby -r, a
// sed or awk program file): the program named after them still counts.
var preloads = map[string]bool{
	"-r": true, "--require": true, "--import": true, "--loader": true, "--experimental-loader": true,
	"-f": true, "--file": true,
}

// inline are the options whose value is the program itself (a command
// string, a module name): the file is then no program of theirs.
var inline = map[string]bool{"-e": true, "-E": true, "-p": true, "--eval": true, "--print": true, "-m": true}

// inlineFor are the options inline for one interpreter only (php -r runs
// its value as code; node's and ruby's -r load a file).
var inlineFor = map[string]string{"-r": "php"}

// textTools are the interpreters whose arguments other than a -f file are
// their inline program and their input.
var textTools = map[string]bool{"sed": true, "gsed": true, "awk": true, "gawk": true, "mawk": true}

// inlineHere reports whether option opt is inline for the program prog.
func inlineHere(opt, prog string) bool {
	p, ok := inlineFor[opt]
	return ok && strings.HasPrefix(prog, p)
}

// runnerModules are the modules that run the program their command line
// names next (python3 -m cProfile x.py runs x.py).
var runnerModules = map[string]bool{
	"cProfile": true, "profile": true, "pdb": true, "trace": true, "runpy": true, "timeit": true,
	"coverage": true, "pyinstrument": true, "scalene": true, "memray": true, "viztracer": true,
	"debugpy": true, "pytest": true, "unittest": true, "doctest": true, "IPython": true,
}

// execd remembers, per process, the file the act gate let it exec (device,
// inode) and the content it decided on, so that the interpreter the kernel
// then runs (the same process) reads that content without asking again (a
// single-use owner token was spent at the exec). Another file under the
// name, or the file rewritten since, is decided as any interpreter read.
type execd struct {
	mu sync.Mutex
	m  map[principal.ProcID]execdFile
}

type execdFile struct {
	dev, ino uint64
	hash     authority.Hash
}

// allow remembers that process id exec'd the file st with content h; a
// zero h (the class alone allowed the exec) forgets what it exec'd before.
func (x *execd) allow(id principal.ProcID, st *syscall.Stat_t, h authority.Hash) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if st == nil || h == (authority.Hash{}) {
		delete(x.m, id)
		return
	}
	if x.m == nil || len(x.m) > 4096 {
		x.m = map[principal.ProcID]execdFile{}
	}
	x.m[id] = execdFile{dev: uint64(st.Dev), ino: st.Ino, hash: h}
}

// ran reports whether process id exec'd the file st and hash (the content
// it holds now) is the content that exec was decided on.
func (x *execd) ran(id principal.ProcID, st *syscall.Stat_t, hash func() (authority.Hash, error)) bool {
	x.mu.Lock()
	f, ok := x.m[id]
	x.mu.Unlock()
	if !ok || st == nil || f.dev != uint64(st.Dev) || f.ino != st.Ino {
		return false
	}
	h, err := hash()
	return err == nil && h == f.hash
}

// Interpret decides a read open of the file st at rel (label l) by res
// that runs it: an interpreter naming it as its program, or the load of a
// shared library. Content below act is decided by the act gate as an exec
// ("interpret"); anything else is a plain read (0).
//
// tid is the thread making the open (it waits for the answer).
func (g *Gate) Interpret(tid int, res *principal.Resolved, rel string, st *syscall.Stat_t, l *label.Label) syscall.Errno {
	if l == nil || label.StampOf(l).Class == authority.Act || !res.Identified {
		return 0
	}
	base := path.Base(rel)
	lib := strings.HasSuffix(base, ".so") || strings.Contains(base, ".so.")
	if !lib && !(g.Policy().Interpreter(res.Proc.Exe) && (ownSource(res.Proc.Exe, base) || g.runsAny(res.Proc.ID.Tgid, rel))) && !(g.elf(rel) && loaderOpens(tid)) {
		return 0
	}
	if g.execd.ran(res.Proc.ID, st, func() (authority.Hash, error) { return g.hashOf(rel, st) }) {
		return 0 // the interpreter of the content the act gate let this process exec
	}
	return g.Exec(res, "interpret", rel, st, l)
}

// runsAny reports whether the command line of process pid names the file
// at rel, under rel or under a name it had a moment ago (renamed.go), as
// the program it runs.
func (g *Gate) runsAny(pid int, rel string) bool {
	names, ok := g.renames.names(rel)
	if !ok {
		return true
	}
	for _, n := range names {
		if runs(pid, g.names(pid, n)) {
			return true
		}
	}
	return false
}

// names returns the test of a path the process pid names (absolute, as
// the process sees it) against the workspace file rel: the same path, a
// descriptor of the process open on it (/dev/fd/N, /proc/self/fd/N), or a
// path whose symlinks in the workspace lead to it.
func (g *Gate) names(pid int, rel string) func(string) bool {
	return func(a string) bool {
		if a == rel || strings.HasSuffix(a, "/"+rel) {
			return true
		}
		if fd, ok := fdPath(a); ok {
			t, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd)
			if err != nil {
				return false
			}
			a = t
			if a == rel || strings.HasSuffix(a, "/"+rel) {
				return true
			}
		}
		r, ok := g.wsRel(a)
		return ok && g.follow(r) == rel
	}
}

// fdPath reports whether a names one of its process's descriptors, and
// which.
func fdPath(a string) (string, bool) {
	switch a {
	case "/dev/stdin":
		return "0", true
	case "/dev/stdout":
		return "1", true
	case "/dev/stderr":
		return "2", true
	}
	for _, p := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if fd, ok := strings.CutPrefix(a, p); ok && fd != "" && !strings.Contains(fd, "/") {
			return fd, true
		}
	}
	return "", false
}

// wsRel is the root-relative path of the absolute path a, when a lies in
// the root.
func (g *Gate) wsRel(a string) (string, bool) {
	root := g.c.Path
	switch {
	case root == "":
		return "", false
	case a == root:
		return ".", true
	case strings.HasPrefix(a, root+"/"):
		return a[len(root)+1:], true
	}
	return "", false
}

// follow resolves the symlinks along the root-relative path rel through
// the backing directory (at most 40, as the kernel) and returns where they
// lead: rel itself when it has none or does not exist, "" when they leave
// the root.
func (g *Gate) follow(rel string) string {
	for hops := 0; hops <= 40; hops++ {
		parts := strings.Split(rel, "/")
		next := ""
		for i := range parts {
			pre := strings.Join(parts[:i+1], "/")
			st, err := g.c.Dir.Lstat(pre)
			if err != nil {
				return rel
			}
			if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				continue
			}
			b, err := g.c.Dir.Readlink(pre)
			if err != nil {
				return ""
			}
			t := string(b)
			if strings.HasPrefix(t, "/") {
				var ok bool
				if t, ok = g.wsRel(path.Clean(t)); !ok {
					return ""
				}
			} else {
				t = path.Join(path.Dir(pre), t)
			}
			next = path.Join(t, strings.Join(parts[i+1:], "/"))
			break
		}
		if next == "" {
			return rel
		}
		if next == ".." || strings.HasPrefix(next, "../") {
			return ""
		}
		rel = next
	}
	return ""
}

// runs reports whether the command line of process pid names a file
// (names: an absolute path as the process sees it) as the program it
// runs: the first argument that is not an option (unless an option gave
// the program inline), the file of each -f, -r, --require, --import and
// --loader (awk and sed program files, node's and ruby's preloads), the
// file a runner module (-m cProfile) is given, a file a shell's -c string
// sources.
func runs(pid int, names func(string) bool) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	cwd, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	abs := func(a string) bool {
		if a == "" {
			return false
		}
		if !strings.HasPrefix(a, "/") {
			a = cwd + "/" + a
		}
		return names(path.Clean(a))
	}
	prog := path.Base(args[0])
	// sed and awk take their program inline or with -f; their other
	// arguments are input files.
	inlined := textTools[prog]
	for i := 1; i < len(args); i++ {
		a := args[i]
		if opt, val, ok := strings.Cut(a, "="); ok && preloads[opt] && strings.HasPrefix(opt, "--") {
			// --require=./x: the same as --require ./x.
			if abs(val) {
				return true
			}
			continue
		}
		switch {
		case a == "--":
			return !inlined && i+1 < len(args) && abs(args[i+1])
		case a == "-c":
			return i+1 < len(args) && sources(args[i+1], args[i+2:], abs)
		case a == "-m":
			// A module that runs the file named after it.
			if i+1 >= len(args) || !runnerModules[strings.SplitN(args[i+1], ".", 2)[0]] {
				return false
			}
			i++
		case inlineHere(a, prog) || inline[a]:
			// The program is the option's value (node -e CODE): the
			// arguments that follow are no programs, but a file loaded
			// before it (node -e 0 -r ./x, sed -e p -f x) still is.
			inlined = true
		case preloads[a]:
			// awk -f a -f b, node -r a -r b: every one counts.
			if i+1 < len(args) && abs(args[i+1]) {
				return true
			}
			i++
		case interpOpts[a]:
			i++
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
		case inlined:
		default:
			return abs(a)
		}
	}
	return false
}

// sources reports whether a shell command string sources a file names
// accepts (`. FILE`, `source FILE`). A file it names through an expansion
// (`. ./$0`, `source "$1"`) may be any of the string's arguments (pos):
// each of them counts.
func sources(code string, pos []string, names func(string) bool) bool {
	f := strings.FieldsFunc(code, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == ';' || r == '&' || r == '|' || r == '(' || r == ')' || r == '{' || r == '}'
	})
	for i := 0; i+1 < len(f); i++ {
		if f[i] != "." && f[i] != "source" {
			continue
		}
		op := strings.Trim(f[i+1], `"'`)
		if names(op) {
			return true
		}
		if strings.ContainsAny(op, "$`") {
			for _, a := range pos {
				if names(a) {
					return true
				}
			}
		}
	}
	return false
}

// elf reports whether the file at rel starts as an ELF object does: the
// loader maps nothing else, so only such a file needs loaderOpens.
func (g *Gate) elf(rel string) bool {
	f, err := g.c.Dir.OpenFile(rel, os.O_RDONLY)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := f.ReadAt(magic[:], 0)
	return n == 4 && string(magic[:]) == "\x7fELF"
}

// loaderOpens reports whether thread tid, blocked in the open being
// decided, makes it from the dynamic loader's code: the address of its
// system call (/proc/TID/syscall) lies in a mapping of the loader
// (/proc/TID/maps). LD_PRELOAD, a DT_NEEDED entry and dlopen all open a
// library through the loader, whatever its name; a program reading a file
// makes the call from its C library or its own code. It answers false
// when the thread's /proc does not answer within principal.ProcWait.
func loaderOpens(tid int) bool {
	if tid <= 0 {
		return false
	}
	var yes atomic.Bool
	principal.WithinProcWait(tid, func() { yes.Store(loaderPC(tid)) })
	return yes.Load()
}

func loaderPC(tid int) bool {
	dir := "/proc/" + strconv.Itoa(tid) + "/"
	b, err := os.ReadFile(dir + "syscall")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 9 { // "running", or no system call
		return false
	}
	pc, err := strconv.ParseUint(strings.TrimPrefix(f[len(f)-1], "0x"), 16, 64)
	if err != nil {
		return false
	}
	maps, err := os.Open(dir + "maps")
	if err != nil {
		return false
	}
	defer maps.Close()
	// The mappings come in address order: read up to the one holding pc.
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		span, rest, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		lo, hi, ok := strings.Cut(span, "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || pc >= end {
			continue
		}
		if pc < start {
			return false
		}
		fs := strings.Fields(rest)
		return len(fs) >= 5 && isLoader(path.Base(fs[4]))
	}
	return false
}

// isLoader reports whether base names a dynamic loader (glibc's
// ld-linux-*.so.N and ld.so, musl's ld-musl-*.so.1).
func isLoader(base string) bool {
	return strings.HasPrefix(base, "ld-linux") || strings.HasPrefix(base, "ld-musl") ||
		strings.HasPrefix(base, "ld.so") || strings.HasPrefix(base, "ld64.so")
}
