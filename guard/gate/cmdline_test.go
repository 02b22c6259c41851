package gate

import (
	"strings"
	"testing"
)

// Which argument of a command line is the program (the file F), for each
// family of interpreters: option values, inline programs, files loaded
// first, clusters of short options, preloads in the environment.
func TestRunsArgs(t *testing.T) {
	names := func(a string) bool { return a == "/w/F" }
	c := func(env map[string]string) *cmdline {
		if env == nil {
			env = map[string]string{"HOME": "/home/o", "PATH": "/usr/bin:/bin"}
		}
		return &cmdline{env: env, names: names, cwd: "/w"}
	}
	cases := []struct {
		cmd  string
		runs bool
	}{
		// shells
		{"sh F", true}, {"bash -e F", true}, {"sh -e F", true}, {"dash -e F", true}, {"bash -E F", true},
		{"bash -p F", true}, {"bash -m F", true}, {"bash -x -o errexit F", true}, {"bash +o posix F", true},
		{"bash --rcfile /dev/null F", true}, {"bash --rcfile F -i", true}, {"bash --norc F", true},
		{"bash -c ._F", true}, {"bash -xc ._./F", true}, {"sh -ec ._./$0 F", true}, {"bash -c ._./n3.tx?", true},
		{"bash -c f=F;_._./$f", true}, {"bash -c echo_F", false}, {"bash -c cat_F", false}, {"bash -c source_\"F\"", true},
		{"busybox sh F", true}, {"bash x.sh F", false},
		// python
		{"python3 F", true}, {"python3 -E F", true}, {"python3 -O F", true}, {"python3 -OO F", true},
		{"python3 -I F", true}, {"python3 -d F", true}, {"python3 -Es F", true}, {"python3 -W error F", true},
		{"python3 -X dev F", true}, {"python3 -c code F", false}, {"python3 -Ic code F", false},
		{"python3 -m cProfile F", true}, {"python3 -m http.server F", false}, {"python3 x.py F", false},
		// node and its kin
		{"node F", true}, {"node --title agent F", true}, {"node -r F -e 0", true}, {"node --require=F -e 0", true},
		{"node --require F -e 0", true}, {"node -e 0 F", false}, {"node -e 0 -r F", true}, {"node --import=F x.js", true},
		{"node --no-warnings F", true}, {"node x.js F", false}, {"deno run F", true}, {"bun run F", true},
		// perl, ruby, php, lua
		{"perl F", true}, {"perl -c F", true}, {"perl -w F", true}, {"perl -e code F", false}, {"perl -E code F", false},
		{"ruby F", true}, {"ruby -rF -e 0", true}, {"ruby -r F x.rb", true}, {"ruby -e 0 F", false}, {"ruby -I lib F", true},
		{"php F", true}, {"php -f F", true}, {"php -r code F", false}, {"php -d x=1 F", true},
		{"lua F", true}, {"lua -e code F", false}, {"lua -l mod F", true},
		// sed and awk: a program file only through -f
		{"sed -f F", true}, {"sed -nf F", true}, {"sed -fF", true}, {"sed -s -f F", true}, {"sed -e p -f F", true},
		{"sed --file=F", true}, {"sed -n 1p F", false}, {"sed -f own.sed F", false}, {"sed -i s/a/b/ F", false},
		{"awk -f F", true}, {"awk -fF", true}, {"awk -f own.awk F", false}, {"awk {print} F", false},
		{"gawk -i F -f own.awk", true}, {"awk -v x=1 -f F", true},
		// the loader
		{"ld.so F", true}, {"ld-linux-x86-64.so.2 --library-path /x F", true}, {"ld.so --preload F /bin/true", true},
		{"ld.so --argv0 x F", true}, {"ld-2.31.so --preload F /bin/true", true},
		// from the third outside pass
		{"perl -I lib F", true}, {"python3 -m pdb -c continue F", true}, {"python3 -m cProfile -o /dev/null F", true},
		{"python3 -m pydoc ./F", true}, {"node --unhandled-rejections strict F", true}, {"mawk -W exec F", true},
		{"ld.so /bin/bash F", true}, {"ld.so /usr/bin/python3 -I F", true}, {"ld.so --glibc-hwcaps-mask x86-64-v2 ./F", true},
		{"bash -c -l ._./F", true}, {"sh -c -- ._./F", true}, {"bash -c ._./F>/dev/null", true}, {"bash -c \\._./F", true},
		{"bash -c \"source\"_./F", true}, {"bash -c source_\"$HOME/env.sh\";wc_-l<F", false},
		{"bash -c ._\"$HOME/.nvm/nvm.sh\";head_-1<page.txt", false}, {"bash -c ._$(echo_F)", true}, {"bash -c ._\"$0\" F", true},
		{"bash -c ._'$0' F", false},
		// options after --
		{"python3 -- F", true}, {"node -e 0 -- F", false},
	}
	for _, k := range cases {
		args := strings.Fields(k.cmd) // _ is a space within one argument
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "_", " ")
		}
		sp, args := programOf(args[0], args)
		if got := c(nil).runsArgs(sp, args); got != k.runs {
			t.Errorf("%q: runs F = %v, want %v", k.cmd, got, k.runs)
		}
	}
	// Command strings as one argument each.
	strs := []struct {
		args []string
		runs bool
	}{
		{[]string{"sh", "-c", `set -- ./F; . "$1"`}, true},
		{[]string{"sh", "-c", `for f in ./F; do . "$f"; done`}, true},
		{[]string{"sh", "-c", `f() { . "$1"; }; f ./F`}, true},
		{[]string{"sh", "-c", `echo ./F | { read f; . "$f"; }`}, true},
		{[]string{"sh", "-c", `s=.; $s ./F`}, true},
		{[]string{"sh", "-c", `eval ". ./F"`}, true},
		{[]string{"sh", "-c", `eval '. $0'`, "F"}, true},
		{[]string{"sh", "-c", `eval "$cmd"`}, true},
		{[]string{"bash", "-c", "-l", `source /root/.claude/shell-snapshots/snapshot-bash-1.sh && eval 'wc -l < F' \< /dev/null && pwd -P >| /tmp/claude-1-cwd`}, false},
		{[]string{"bash", "-c", "-l", `source /root/.claude/shell-snapshots/snapshot-bash-1.sh && eval '. ./F' \< /dev/null`}, true},
		{[]string{"sh", "-c", `command . ./F`}, true},
		{[]string{"sh", "-c", `. ./F 2>&1 >/dev/null`}, true},
		{[]string{"bash", "-c", `cat "$0"`, "F"}, false},
		{[]string{"bash", "-c", `x=$(pwd); wc -l < F`}, false},
		{[]string{"bash", "-c", `echo $HOME; head -1 < F`}, false},
		{[]string{"bash", "-c", `echo '. $x'; head -1 < F`}, false},
		{[]string{"bash", "-c", `source "$HOME/env.sh" && head -1 F`}, false},
		{[]string{"bash", "-c", `2>/dev/null . ./F`}, true},
		{[]string{"bash", "-c", `. -- ./F`}, true},
		{[]string{"bash", "-c", `eval -- '. ./F'`}, true},
		{[]string{"bash", "-c", `1>&2 eval ". ./F"`}, true},
		{[]string{"bash", "-c", `trap '. ./F' EXIT`}, true},
		{[]string{"bash", "-c", `command -p . ./F`}, true},
		{[]string{"bash", "-c", `time -p . ./F`}, true},
		{[]string{"bash", "-O", "expand_aliases", "-c", "alias s=.\ns ./F"}, true},
		{[]string{"bash", "-c", `out=$(. ./F)`}, true},
		{[]string{"bash", "-c", `echo "$(. ./F)"`}, true},
		{[]string{"bash", "-c", "echo `. ./F`"}, true},
		{[]string{"bash", "-c", `for HOME in ./F; do . "$HOME"; done`}, true},
		{[]string{"bash", "-c", `C=./F; [ -f "$C" ] || C=./default.conf; . "$C"`}, true},
		{[]string{"bash", "-c", "cat > notes.md <<'EOF'\n```python\n$x\n. ./F\nEOF\nhead -1 < F"}, false},
		{[]string{"bash", "-c", "cat > notes.md <<-EOF\n\t$x\n\tEOF\n. ./F"}, true},
		{[]string{"bash", "-c", `echo hi 2>&1 | head -1 < F`}, false},
		{[]string{"node", "--test-timeout", "1000", "./F"}, true},
		{[]string{"perl", "-MData::Dumper", "./F"}, true},
		{[]string{"perl", "-Mfeature=say", "F"}, true},
		{[]string{"perl", "-l", "F"}, true},
		{[]string{"perl", "-ne", "print", "F"}, false},
		{[]string{"ruby", "-W:no-deprecated", "F"}, true},
	}
	for _, k := range strs {
		sp, args := programOf(k.args[0], k.args)
		if got := c(nil).runsArgs(sp, args); got != k.runs {
			t.Errorf("%q: runs F = %v, want %v", k.args, got, k.runs)
		}
	}
	env := []struct {
		prog string
		env  map[string]string
		runs bool
	}{
		{"node", map[string]string{"NODE_OPTIONS": "--require ./F"}, true},
		{"node", map[string]string{"NODE_OPTIONS": "--require=./F --no-warnings"}, true},
		{"node", map[string]string{"NODE_OPTIONS": `--require "./F"`}, true},
		{"node", map[string]string{"NODE_OPTIONS": "--max-old-space-size 4096 F"}, false},
		{"bash", map[string]string{"BASH_ENV": "./F"}, true},
		{"bash", map[string]string{"BASH_ENV": "${PWD}/F", "PWD": "/w"}, true},
		{"bash", map[string]string{"BASH_ENV": "${PWD}/F${E-}", "PWD": "/w"}, true},
		{"bash", map[string]string{"BASH_ENV": "$HOME/.bashenv", "HOME": "/home/o"}, false},
		{"sh", map[string]string{"ENV": "/w/F"}, true},
		{"ruby", map[string]string{"RUBYOPT": "-r./F"}, true},
		{"python3", map[string]string{"BASH_ENV": "./F"}, false},
		{"ld.so", map[string]string{"LD_PRELOAD": "/lib/x.so /w/F"}, true},
	}
	for _, k := range env {
		if got := c(k.env).runsEnv(specOf(k.prog)); got != k.runs {
			t.Errorf("%s with %v: runs F = %v, want %v", k.prog, k.env, got, k.runs)
		}
	}
}
