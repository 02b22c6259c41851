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
// errexit, python3 -W error, perl -I lib), which give the program inline
// (python3 -c, node -e, sed's and awk's script), which load a file before
// the program (node -r, awk -f, bash --rcfile, ld.so --preload), and short
// options come in clusters (sh -ec, sed -nf FILE, awk -fFILE). Each family
// of interpreters has its table (argSpec), chosen by the program the
// process runs (its exe, not its argv[0]); an option a table does not name
// is taken to have none, so that the argument after it counts as the
// program (a data file taken for one is refused, never the reverse); an
// unknown long option's possible value counts too. Preloads named in the
// environment count as well (NODE_OPTIONS, RUBYOPT, BASH_ENV, ENV,
// LD_PRELOAD, LD_AUDIT), and a name without a slash is also looked up
// along the process's PATH, as a shell looks up a script or a sourced
// file. A shell's -c string is read for the files it sources, with the
// variables it can be known to expand (the environment, the string's
// arguments, its own assignments); a sourced name that cannot be known (a
// command substitution, a pattern) counts for every file the shell reads.

// argSpec is how one family of interpreters reads its command line.
type argSpec struct {
	command string          // short options whose value is a shell command string (sh -c)
	inline  map[string]bool // options whose value is the program itself
	value   map[string]bool // options with a value that is no program
	// attached are options whose value is the rest of their cluster only,
	// possibly empty (perl -MData::Dumper, perl -l).
	attached map[string]bool
	loads    map[string]bool // options whose value is a file run before the program
	module   bool            // -m MODULE runs a module (a runner module runs the files after it)
	input    bool            // the arguments are the inline program and input files
	sub      bool            // the first argument is a subcommand (deno run FILE)
	loader   bool            // the program named is run in turn (ld.so PROGRAM ARGS)
	env      []string        // environment variables naming files it runs first
	envOpts  string          // an environment variable holding more options (NODE_OPTIONS)
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
		value: set("--title", "--input-type", "-C", "--conditions", "--env-file", "--stack-size", "--max-old-space-size",
			"--unhandled-rejections", "--inspect-port", "--redirect-warnings", "--report-dir", "--report-directory",
			"--report-filename", "--icu-data-dir", "--openssl-config", "--tls-cipher-list", "--disable-warning",
			"--experimental-default-type", "--watch-path", "--test-reporter", "--test-reporter-destination",
			"--test-name-pattern", "--heapsnapshot-signal", "--diagnostic-dir", "--dns-result-order", "--secure-heap",
			"--secure-heap-min", "--snapshot-blob", "--localstorage-file", "--trace-event-categories",
			"--trace-event-file-pattern", "--cpu-prof-dir", "--heap-prof-dir", "--max-http-header-size",
			"--test-timeout", "--test-concurrency", "--test-shard", "--test-coverage-include", "--test-coverage-exclude",
			"--test-coverage-branches", "--test-coverage-functions", "--test-coverage-lines", "--test-isolation",
			"--env-file-if-exists", "--experimental-sea-config", "--watch-kill-signal", "--cpu-prof-name",
			"--heap-prof-name", "--cpu-prof-interval", "--heap-prof-interval", "--stack-trace-limit", "--v8-pool-size",
			"--use-largepages", "--openssl-shared-config", "--policy-integrity", "--experimental-network-inspection"),
		loads:   set("-r", "--require", "--import", "--loader", "--experimental-loader", "--experimental-policy"),
		envOpts: "NODE_OPTIONS"}
	denoArgs = &argSpec{inline: nodeArgs.inline, value: nodeArgs.value, loads: nodeArgs.loads, sub: true}
	perlArgs = &argSpec{inline: set("-e", "-E"), value: set("-I"),
		attached: set("-M", "-m", "-x", "-i", "-l", "-0", "-C", "-d", "-D", "-V")}
	rubyArgs = &argSpec{inline: set("-e"), value: set("-I", "-C", "-E", "--encoding"),
		attached: set("-W", "-K", "-T", "-x", "-0"), loads: set("-r", "--require"), envOpts: "RUBYOPT"}
	phpArgs = &argSpec{inline: set("-r", "-B", "-R", "-E"), value: set("-c", "-d", "-z"), loads: set("-f", "-F")}
	awkArgs = &argSpec{input: true, inline: set("-e", "--source"), value: set("-v", "-F", "-W", "--assign", "--field-separator"),
		loads: set("-f", "--file", "-i", "--include", "-E", "--exec")}
	sedArgs    = &argSpec{input: true, inline: set("-e", "--expression"), value: set("-l", "--line-length"), loads: set("-f", "--file")}
	luaArgs    = &argSpec{inline: set("-e"), value: set("-l")}
	loaderArgs = &argSpec{value: set("--library-path", "--argv0", "--inhibit-rpath", "--glibc-hwcaps-mask", "--glibc-hwcaps-prepend"),
		loads: set("--preload", "--audit"), loader: true, env: []string{"LD_PRELOAD", "LD_AUDIT"}}
	otherArgs = &argSpec{inline: set("-e")}
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
	case loaderName(prog):
		return loaderArgs
	}
	return otherArgs
}

// runnerModules are the modules that run the files their command line
// names after them (python3 -m cProfile x.py runs x.py).
var runnerModules = map[string]bool{
	"cProfile": true, "profile": true, "pdb": true, "trace": true, "runpy": true, "timeit": true,
	"coverage": true, "pyinstrument": true, "scalene": true, "memray": true, "viztracer": true,
	"debugpy": true, "pytest": true, "unittest": true, "doctest": true, "IPython": true, "pydoc": true,
}

// cmdline is what runs reads of a process: its arguments, its
// environment, and how it resolves a name it is given.
type cmdline struct {
	args  []string
	env   map[string]string
	names func(string) bool // names the file (an absolute path as the process sees it)
	cwd   string
}

// abs reports whether the name a, as the process resolves it (from its
// working directory; a name without a slash also along its PATH, as a
// shell finds a script or a sourced file), is the file.
func (c *cmdline) abs(a string) bool {
	if a == "" {
		return false
	}
	if strings.HasPrefix(a, "/") {
		return c.names(path.Clean(a))
	}
	if c.names(path.Clean(c.cwd + "/" + a)) {
		return true
	}
	if strings.Contains(a, "/") {
		return false
	}
	for _, d := range strings.Split(c.env["PATH"], ":") {
		if d != "" && c.names(path.Clean(d+"/"+a)) {
			return true
		}
	}
	return false
}

// runs reports whether process pid, running the program exe, runs a file
// names accepts (an absolute path as the process sees it): its command
// line names it as the program or as code loaded first, or its
// environment names it as a preload. When the process's /proc does not
// answer within principal.ProcWait, the file is taken to run.
func runs(pid int, exe string, names func(string) bool) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	var raw, environ []byte
	var cwd string
	var cerr error
	if !principal.WithinProcWait(pid, func() {
		raw, cerr = os.ReadFile(dir + "cmdline")
		environ, _ = os.ReadFile(dir + "environ")
		cwd, _ = os.Readlink(dir + "cwd")
	}) {
		return true
	}
	if cerr != nil || len(raw) == 0 {
		return false
	}
	c := &cmdline{args: strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), env: map[string]string{}, names: names, cwd: cwd}
	for _, kv := range strings.Split(string(environ), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			c.env[k] = v
		}
	}
	sp, args := programOf(exe, c.args)
	return c.runsArgs(sp, args) || c.runsEnv(sp)
}

// programOf is the table of the program exe runs with the arguments args,
// and the arguments as that program reads them: busybox runs the applet
// its argv[0] names (busybox sh FILE: the one after it).
func programOf(exe string, args []string) (*argSpec, []string) {
	prog := path.Base(exe)
	if prog == "busybox" {
		if path.Base(args[0]) == "busybox" && len(args) > 1 {
			args = args[1:]
		}
		prog = path.Base(args[0])
	}
	if exe == "" {
		prog = path.Base(args[0])
	}
	return specOf(prog), args
}

// runsArgs reports whether the command line args (args[0] the program)
// names the file as the program it runs or as code it loads first.
func (c *cmdline) runsArgs(sp *argSpec, args []string) bool {
	i := 1
	if sp.sub && i < len(args) && !strings.HasPrefix(args[i], "-") {
		i++ // deno run FILE
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
			return !inlined && i+1 < len(args) && c.abs(args[i+1])
		case strings.HasPrefix(a, "--"):
			opt, val, eq := strings.Cut(a, "=")
			rest := ""
			if eq {
				rest = val
			}
			switch {
			case sp.loads[opt]:
				if v, ok := value(rest); ok && c.abs(v) {
					return true
				}
			case sp.inline[opt]:
				inlined = true
				value(rest)
			case sp.value[opt]:
				value(rest)
			case !eq && !inlined && i+1 < len(args) && c.abs(args[i+1]):
				// An option this table does not know may take the next
				// argument as its value, or not: either way that
				// argument may be the program.
				return true
			}
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			// A cluster of short options: -ec, -nf FILE, -fFILE, -rMOD.
			for j := 1; j < len(a); j++ {
				o, rest := a[:1]+a[j:j+1], a[j+1:]
				if !alnum(a[j]) {
					break // the rest is some option's value (-W:no-deprecated)
				}
				switch {
				case a[0] == '-' && strings.IndexByte(sp.command, a[j]) >= 0:
					// sh -c [OPTIONS] STRING [NAME ARGS...]: the string is
					// the first argument that is no option.
					k := i + 1
					for k < len(args) && len(args[k]) > 1 && (args[k][0] == '-' || args[k][0] == '+') {
						if args[k] == "--" {
							k++
							break
						}
						if sp.value[args[k]] {
							k++
						}
						k++
					}
					return k < len(args) && c.sources(args[k], args[k+1:])
				case sp.loads[o]:
					if v, ok := value(rest); ok && c.abs(v) {
						return true
					}
					j = len(a)
				case sp.inline[o]:
					inlined = true
					value(rest)
					j = len(a)
				case sp == awkArgs && o == "-W":
					// mawk -W exec FILE: the program file, then its
					// arguments.
					v, _ := value(rest)
					if strings.HasPrefix(v, "e") && i+1 < len(args) && c.abs(args[i+1]) {
						return true
					}
					j = len(a)
				case sp.value[o]:
					value(rest)
					j = len(a)
				case sp.attached[o]:
					j = len(a)
				case sp.module && o == "-m":
					// A runner module runs the files named after it, past
					// its own options.
					m, ok := value(rest)
					if !ok || !runnerModules[strings.SplitN(m, ".", 2)[0]] {
						return false
					}
					for _, b := range args[i+1:] {
						if c.abs(b) {
							return true
						}
					}
					return false
				}
			}
		case inlined:
		case sp.loader:
			// ld.so PROGRAM ARGS: the program, read as it reads its own
			// arguments.
			if c.abs(a) {
				return true
			}
			return c.runsArgs(specOf(path.Base(a)), args[i:])
		default:
			return c.abs(a)
		}
	}
	return false
}

// runsEnv reports whether the environment names the file as code the
// interpreter loads first.
func (c *cmdline) runsEnv(sp *argSpec) bool {
	for _, e := range sp.env {
		v := c.env[e]
		if v == "" {
			continue
		}
		if sp.loader {
			// LD_PRELOAD, LD_AUDIT: lists separated by spaces or colons.
			for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ':' }) {
				if c.abs(f) {
					return true
				}
			}
			continue
		}
		// BASH_ENV and ENV are expanded by the shell before it reads them.
		x, known := c.expand(v, nil, nil, nil)
		if !known || c.abs(x) {
			return true
		}
	}
	if sp.envOpts != "" && c.env[sp.envOpts] != "" {
		// Only the options that load files count here: the program
		// itself is never named in these variables.
		loads := &argSpec{loads: sp.loads, value: sp.value, inline: sp.inline, input: true}
		if c.runsArgs(loads, append([]string{""}, splitQuoted(c.env[sp.envOpts])...)) {
			return true
		}
	}
	return false
}

// splitQuoted splits an options variable into words as node and ruby do:
// on white space, with double quotes grouping and backslashes escaping.
func splitQuoted(v string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for i := 0; i < len(v); i++ {
		ch := v[i]
		switch {
		case ch == '\\' && i+1 < len(v):
			i++
			w.WriteByte(v[i])
			in = true
		case ch == '"' || ch == '\'':
			quoted = !quoted
			in = true
		case (ch == ' ' || ch == '\t' || ch == '\n') && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
