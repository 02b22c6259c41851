package gate

import (
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/aerfs/aerfs/principal"
)

// # Which file a command line runs
//
// An interpreter reading a file runs it when its command line names the
// file as its program, or as code it loads first. Which argument that is
// depends on the interpreter's options: which take a value (bash -o
// errexit, python3 -W error), which give the program inline (python3 -c,
// node -e, sed's script), which load a file before the program (node -r,
// awk -f, bash --rcfile), and short options come in clusters (sh -ec,
// sed -nf FILE, awk -fFILE). Each family of interpreters has its table
// (argSpec); an option a table does not name is taken to have no value,
// so that the argument after an unknown option counts as the program (a
// data file taken for one is refused, never the reverse). Preloads named
// in the environment count as well (NODE_OPTIONS, BASH_ENV, ENV,
// RUBYOPT).

// argSpec is how one family of interpreters reads its command line.
type argSpec struct {
	command string          // short options whose value is a shell command string (sh -c)
	inline  map[string]bool // options whose value is the program itself
	value   map[string]bool // options with a value that is no program
	loads   map[string]bool // options whose value is a file run before the program
	module  bool            // -m MODULE runs a module (a runner module runs the file after it)
	input   bool            // the arguments are the inline program and input files
	sub     bool            // the first argument is a subcommand (deno run FILE, busybox sh FILE)
	env     []string        // environment variables naming files it runs first
	envOpts string          // an environment variable holding more options (NODE_OPTIONS)
}

func set(opts ...string) map[string]bool {
	m := make(map[string]bool, len(opts))
	for _, o := range opts {
		m[o] = true
	}
	return m
}

var (
	shellArgs = &argSpec{command: "c", value: set("-o", "+o", "-O", "+O"),
		loads: set("--rcfile", "--init-file"), env: []string{"BASH_ENV", "ENV"}}
	pythonArgs = &argSpec{inline: set("-c"), value: set("-W", "-X", "--check-hash-based-pycs"), module: true}
	nodeArgs   = &argSpec{inline: set("-e", "-p", "--eval", "--print"),
		value: set("--title", "--input-type", "-C", "--conditions", "--env-file", "--stack-size", "--max-old-space-size"),
		loads: set("-r", "--require", "--import", "--loader", "--experimental-loader"), envOpts: "NODE_OPTIONS"}
	denoArgs = &argSpec{inline: nodeArgs.inline, value: nodeArgs.value, loads: nodeArgs.loads, sub: true}
	perlArgs = &argSpec{inline: set("-e", "-E")}
	rubyArgs = &argSpec{inline: set("-e"), value: set("-I", "-C", "-E", "--encoding"),
		loads: set("-r", "--require"), envOpts: "RUBYOPT"}
	phpArgs    = &argSpec{inline: set("-r", "-B", "-R", "-E"), value: set("-c", "-d", "-z"), loads: set("-f", "-F")}
	awkArgs    = &argSpec{input: true, inline: set("-e", "--source"), value: set("-v", "-F", "-W", "--assign", "--field-separator"), loads: set("-f", "--file", "-i", "--include")}
	sedArgs    = &argSpec{input: true, inline: set("-e", "--expression"), value: set("-l", "--line-length"), loads: set("-f", "--file")}
	luaArgs    = &argSpec{inline: set("-e"), value: set("-l")}
	loaderArgs = &argSpec{value: set("--library-path", "--argv0", "--inhibit-rpath"), loads: set("--preload", "--audit")}
	otherArgs  = &argSpec{inline: set("-e")}
)

// specOf is the table of the interpreter whose program's base name is prog.
func specOf(prog string) *argSpec {
	has := func(ps ...string) bool {
		for _, p := range ps {
			if strings.HasPrefix(prog, p) {
				return true
			}
		}
		return false
	}
	switch {
	case prog == "busybox":
		return &argSpec{command: "c", value: shellArgs.value, sub: true}
	case has("sh", "bash", "dash", "zsh", "ksh", "mksh", "yash", "fish"):
		return shellArgs
	case has("python", "pypy"):
		return pythonArgs
	case has("deno", "bun"):
		return denoArgs
	case has("node"):
		return nodeArgs
	case has("perl"):
		return perlArgs
	case has("ruby"):
		return rubyArgs
	case has("php"):
		return phpArgs
	case has("awk", "gawk", "mawk"):
		return awkArgs
	case has("sed", "gsed"):
		return sedArgs
	case has("lua"):
		return luaArgs
	case has("ld.so", "ld-linux", "ld-musl", "ld64.so"):
		return loaderArgs
	}
	return otherArgs
}

// runnerModules are the modules that run the program their command line
// names next (python3 -m cProfile x.py runs x.py).
var runnerModules = map[string]bool{
	"cProfile": true, "profile": true, "pdb": true, "trace": true, "runpy": true, "timeit": true,
	"coverage": true, "pyinstrument": true, "scalene": true, "memray": true, "viztracer": true,
	"debugpy": true, "pytest": true, "unittest": true, "doctest": true, "IPython": true,
}

// runs reports whether process pid runs a file names accepts (an absolute
// path as the process sees it): its command line names it as the program
// or as code loaded first, or its environment names it as a preload. When
// the process's /proc does not answer within principal.ProcWait, the file
// is taken to run.
func runs(pid int, names func(string) bool) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	var cmdline, environ []byte
	var cwd string
	var cerr error
	if !principal.WithinProcWait(pid, func() {
		cmdline, cerr = os.ReadFile(dir + "cmdline")
		environ, _ = os.ReadFile(dir + "environ")
		cwd, _ = os.Readlink(dir + "cwd")
	}) {
		return true
	}
	if cerr != nil || len(cmdline) == 0 {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	abs := func(a string) bool {
		if a == "" {
			return false
		}
		if !strings.HasPrefix(a, "/") {
			a = cwd + "/" + a
		}
		return names(path.Clean(a))
	}
	sp := specOf(path.Base(args[0]))
	return runsArgs(sp, args, abs) || runsEnv(sp, strings.Split(string(environ), "\x00"), abs)
}

// runsArgs reports whether the command line args (args[0] the program)
// names a file abs accepts as the program it runs or as code it loads
// first.
func runsArgs(sp *argSpec, args []string, abs func(string) bool) bool {
	i := 1
	if sp.sub && i < len(args) && !strings.HasPrefix(args[i], "-") {
		i++ // deno run FILE, busybox sh FILE
	}
	inlined := sp.input
	// value takes an option's value: the rest of its cluster, else the
	// next argument.
	value := func(rest string) (string, bool) {
		if rest != "" {
			return rest, true
		}
		if i+1 < len(args) {
			i++
			return args[i], true
		}
		return "", false
	}
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return !inlined && i+1 < len(args) && abs(args[i+1])
		case strings.HasPrefix(a, "--"):
			opt, val, eq := strings.Cut(a, "=")
			rest := ""
			if eq {
				rest = val
			}
			switch {
			case sp.loads[opt]:
				if v, ok := value(rest); ok && abs(v) {
					return true
				}
			case sp.inline[opt]:
				inlined = true
				value(rest)
			case sp.value[opt]:
				value(rest)
			}
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			// A cluster of short options: -ec, -nf FILE, -fFILE, -rMOD.
			for j := 1; j < len(a); j++ {
				o, rest := a[:1]+a[j:j+1], a[j+1:]
				switch {
				case a[0] == '-' && strings.IndexByte(sp.command, a[j]) >= 0:
					// sh -c STRING [NAME ARGS...]: the string runs.
					return i+1 < len(args) && sources(args[i+1], abs)
				case sp.loads[o]:
					if v, ok := value(rest); ok && abs(v) {
						return true
					}
					j = len(a)
				case sp.inline[o]:
					inlined = true
					value(rest)
					j = len(a)
				case sp.value[o]:
					value(rest)
					j = len(a)
				case sp.module && o == "-m":
					// A module that runs the file named after it.
					m, ok := value(rest)
					if !ok || !runnerModules[strings.SplitN(m, ".", 2)[0]] {
						return false
					}
					j = len(a)
				}
			}
		case inlined:
		default:
			return abs(a)
		}
	}
	return false
}

// runsEnv reports whether the environment env (NAME=value entries) names
// a file abs accepts as code the interpreter loads first.
func runsEnv(sp *argSpec, env []string, abs func(string) bool) bool {
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		for _, e := range sp.env {
			if k == e && abs(v) {
				return true
			}
		}
		if sp.envOpts != "" && k == sp.envOpts {
			// Only the options that load files count here: the program
			// itself is never named in these variables.
			loads := &argSpec{loads: sp.loads, value: sp.value, inline: sp.inline, input: true}
			if runsArgs(loads, append([]string{""}, strings.Fields(v)...), abs) {
				return true
			}
		}
	}
	return false
}

// sources reports whether a shell command string sources a file names
// accepts (`. FILE`, `source FILE`). A file it sources through an
// expansion or a pattern (`. ./$0`, `source "$f"`, `. ./x*`) may be any
// file: every file the shell reads then counts.
func sources(code string, names func(string) bool) bool {
	f := strings.FieldsFunc(code, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == ';' || r == '&' || r == '|' || r == '(' || r == ')' || r == '{' || r == '}'
	})
	for i := 0; i+1 < len(f); i++ {
		if f[i] != "." && f[i] != "source" {
			continue
		}
		op := strings.Trim(f[i+1], `"'`)
		if names(op) || strings.ContainsAny(op, "$`*?[") {
			return true
		}
	}
	return false
}
