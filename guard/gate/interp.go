package gate

import (
	"bufio"
	"encoding/binary"
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
	if !lib && !(g.Policy().Interpreter(res.Proc.Exe) && (ownSource(res.Proc.Exe, base) || g.runsAny(res.Proc.ID.Tgid, res.Proc.Exe, rel))) && !loaderOpens(tid, res.Proc.ID) {
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
func (g *Gate) runsAny(pid int, exe, rel string) bool {
	names, ok := g.renames.names(rel)
	if !ok {
		return true
	}
	for _, n := range names {
		if runs(pid, exe, g.names(pid, n)) {
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

// loaderOpens reports whether thread tid of process id, blocked in the
// open being decided, makes it from the dynamic loader's code: the address
// of its system call (/proc/TID/syscall) lies in the loader's mappings.
// LD_PRELOAD, a DT_NEEDED entry and dlopen all open a library through the
// loader, whatever its name or its first bytes (which could change between
// this check and the loader's read); a program reading a file makes the
// call from its C library or its own code. The loader is the file mapped
// at the process's AT_BASE (/proc/TID/auxv), whatever its name; its span
// is read from /proc/TID/maps once per process image. When the thread's
// /proc does not answer within principal.ProcWait, the open is taken to be
// the loader's (as runs takes a command line it cannot read).
func loaderOpens(tid int, id principal.ProcID) bool {
	if tid <= 0 {
		return false
	}
	var yes atomic.Bool
	if !principal.WithinProcWait(tid, func() { yes.Store(loaderPC(tid, id)) }) {
		return true
	}
	return yes.Load()
}

// loaderSpan is where a process image's loader is mapped.
type loaderSpan struct{ lo, hi uint64 }

type loaderKey struct {
	id   principal.ProcID
	base uint64
}

var (
	loaderMu    sync.Mutex
	loaderSpans = map[loaderKey]loaderSpan{}
)

func loaderPC(tid int, id principal.ProcID) bool {
	dir := "/proc/" + strconv.Itoa(tid) + "/"
	pc, ok := syscallPC(dir)
	if !ok {
		return false
	}
	base, phdr, ok := atBase(dir)
	if !ok {
		return false
	}
	if base == 0 {
		// No interpreter was mapped: a static program (whose opens are
		// its own), or the loader run as the program itself
		// (ld.so PROGRAM), whose image then holds the loader's code.
		exe, err := os.Readlink(dir + "exe")
		if err != nil || !loaderName(path.Base(exe)) {
			return false
		}
		base = phdr
	}
	k := loaderKey{id, base}
	loaderMu.Lock()
	span, known := loaderSpans[k]
	loaderMu.Unlock()
	if !known {
		if span, ok = mappedFrom(dir, base); !ok {
			return false
		}
		loaderMu.Lock()
		if len(loaderSpans) >= 4096 {
			clear(loaderSpans)
		}
		loaderSpans[k] = span
		loaderMu.Unlock()
	}
	return pc >= span.lo && pc < span.hi
}

// syscallPC is the instruction pointer of the system call the thread is
// blocked in.
func syscallPC(dir string) (uint64, bool) {
	b, err := os.ReadFile(dir + "syscall")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 9 { // "running", or no system call
		return 0, false
	}
	pc, err := strconv.ParseUint(strings.TrimPrefix(f[len(f)-1], "0x"), 16, 64)
	return pc, err == nil
}

// atBase is the process's AT_BASE, where the kernel mapped its program's
// interpreter, the dynamic loader (0 when there is none), and its AT_PHDR,
// an address inside the program's own image.
func atBase(dir string) (base, phdr uint64, ok bool) {
	b, err := os.ReadFile(dir + "auxv")
	if err != nil {
		return 0, 0, false
	}
	const atPhdr, atBaseType = 3, 7
	for i := 0; i+16 <= len(b); i += 16 {
		switch binary.NativeEndian.Uint64(b[i:]) {
		case 0:
			return base, phdr, true
		case atPhdr:
			phdr = binary.NativeEndian.Uint64(b[i+8:])
		case atBaseType:
			base = binary.NativeEndian.Uint64(b[i+8:])
		}
	}
	return base, phdr, true
}

// loaderName reports whether base names a dynamic loader's file (glibc's
// ld-linux-*.so.N, ld.so, and ld-2.NN.so before 2.34; musl's ld-musl-*).
func loaderName(base string) bool {
	return strings.HasPrefix(base, "ld-linux") || strings.HasPrefix(base, "ld-musl") ||
		strings.HasPrefix(base, "ld.so") || strings.HasPrefix(base, "ld64.so") ||
		len(base) > 3 && strings.HasPrefix(base, "ld-") && base[3] >= '0' && base[3] <= '9'
}

// mappedFrom is the span of every mapping of the file whose mapping holds
// the address base.
func mappedFrom(dir string, base uint64) (loaderSpan, bool) {
	maps, err := os.Open(dir + "maps")
	if err != nil {
		return loaderSpan{}, false
	}
	defer maps.Close()
	var file string // "dev inode" of the file mapped at base
	span := loaderSpan{}
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		id := f[3] + " " + f[4]
		switch {
		case start <= base && base < end && f[4] != "0":
			file, span = id, loaderSpan{start, end}
		case file != "" && id == file:
			span.hi = max(span.hi, end)
		}
	}
	return span, file != ""
}
