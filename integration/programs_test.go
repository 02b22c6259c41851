package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// Real programs save memory files the way they always do: editors by
// rename-on-save, sed -i by a temporary file, node and python by
// open(O_TRUNC), git by unlink and create. A clean USER session's saves
// commit intact; a WEB session's are refused and change nothing.

type program struct {
	name, file, script, want string
	needs                    string // a command that must be installed
}

const progOrig = "# notes\n- the owner likes tea\n"

func programs() []program {
	coffee := strings.Replace(progOrig, "tea", "coffee", 1)
	return []program{
		{name: "vim", file: "MEMORY.md", needs: "vim", want: coffee,
			script: `vim -u NONE -N -es -n -c 'set backupcopy=no writebackup' -c '%s/tea/coffee/' -c 'wq' MEMORY.md`},
		{name: "rename-on-save", file: "AGENTS.md", want: coffee,
			script: `$PY - <<'EOF'
import os
data = open("AGENTS.md").read().replace("tea", "coffee")
fd = os.open(".AGENTS.md.swp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, data.encode())
os.fsync(fd)
os.close(fd)
os.rename(".AGENTS.md.swp", "AGENTS.md")
EOF`},
		{name: "backup-then-write", file: "TOOLS.md", want: coffee,
			script: `$PY - <<'EOF'
import os
data = open("TOOLS.md").read().replace("tea", "coffee")
os.rename("TOOLS.md", "TOOLS.md~")
with open("TOOLS.md", "x") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
os.unlink("TOOLS.md~")
EOF`},
		{name: "sed-i", file: "CLAUDE.md", want: coffee, script: `sed -i 's/tea/coffee/' CLAUDE.md`},
		{name: "node-writeFileSync", file: "USER.md", needs: "node", want: "from node sync\n",
			script: `node -e "require('fs').writeFileSync('USER.md', 'from node sync\n')"`},
		{name: "node-writeFile", file: "HEARTBEAT.md", needs: "node", want: "from node async\n",
			script: `node -e "require('fs').writeFile('HEARTBEAT.md', 'from node async\n', e => { if (e) { console.error(e.message); process.exit(1) } })"`},
		{name: "python-open-w", file: "memory/py.md", want: "from python\n",
			script: `$PY -c "open('memory/py.md', 'w').write('from python\n')"`},
	}
}

func TestProgramsSaveMemory(t *testing.T) {
	files := map[string]string{"memory/git.md": progOrig}
	for _, p := range programs() {
		files[p.file] = progOrig
	}
	e := newEnv(t, files).Mount()

	for _, p := range programs() {
		p := p
		t.Run("USER/"+p.name, func(t *testing.T) {
			if p.needs != "" {
				if _, err := exec.LookPath(p.needs); err != nil {
					t.Skip(p.needs + " is not installed")
				}
			}
			r := e.ShT("USER", "prog-user-"+p.name, p.script)
			if r.Code != 0 {
				bugf(t, "%s by a clean USER session refused: %s", p.name, r)
			}
			if got := e.Read(p.file); got != p.want {
				bugf(t, "%s after %s = %q, want %q", p.file, p.name, got, p.want)
			}
		})
	}

	const v2 = progOrig + "- and biscuits\n"
	t.Run("USER/git", func(t *testing.T) {
		git := `git -c user.email=owner@example.org -c user.name=owner -c init.defaultBranch=main`
		r := e.ShT("USER", "prog-user-git", git+` init -q . && `+git+` add memory/git.md && `+git+` commit -qm v1 &&
printf '%s\n' '- and biscuits' >> memory/git.md && `+git+` commit -qam v2 &&
printf 'scratch\n' >> memory/git.md && `+git+` checkout -- memory/git.md && `+git+` status --porcelain -- memory/git.md`)
		if r.Code != 0 {
			bugf(t, "git by a clean USER session: %s", r)
		}
		if strings.TrimSpace(r.Stdout) != "" {
			bugf(t, "git status after checkout: %q, want clean", r.Stdout)
		}
		if got := e.Read("memory/git.md"); got != v2 {
			bugf(t, "memory/git.md after checkout = %q, want %q", got, v2)
		}
		r = e.ShT("USER", "prog-user-git2", git+` checkout HEAD~1 -- memory/git.md && `+git+` status --porcelain -- memory/git.md`)
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != "M  memory/git.md" {
			bugf(t, "git checkout HEAD~1: %s", r)
		}
		if got := e.Read("memory/git.md"); got != progOrig {
			bugf(t, "memory/git.md after checkout HEAD~1 = %q, want %q", got, progOrig)
		}
	})

	// WEB runs the same programs on the files as the USER runs left them.
	li0 := map[string]string{}
	for _, p := range programs() {
		li0[p.file], _ = e.TryRead(p.file)
	}
	li0["memory/git.md"], _ = e.TryRead("memory/git.md")
	webScripts := map[string][2]string{}
	for _, p := range programs() {
		webScripts[p.name] = [2]string{p.file, strings.ReplaceAll(p.script, "from ", "evil from ")}
	}
	webScripts["git"] = [2]string{"memory/git.md", `git checkout HEAD -- memory/git.md`}
	for name, fs := range webScripts {
		name, file, script := name, fs[0], fs[1]
		t.Run("WEB/"+name, func(t *testing.T) {
			r := e.ShT("WEB", "prog-web-"+name, script)
			if got, _ := e.TryRead(file); got != li0[file] {
				bugf(t, "%s by WEB changed %s to %q\n%s", name, file, got, r)
			}
			if r.Code == 0 {
				bugf(t, "%s by WEB exited 0 though nothing changed: %s", name, r)
			}
		})
	}
	li := e.index()
	for name, fs := range webScripts {
		if d := li.denials("prog-web-"+name, append(ancestors(fs[0]), fs[0])...); len(d) == 0 {
			// Temporary names in a guarded directory count as the route.
			if d2 := li.denials("prog-web-" + name); len(d2) == 0 {
				bugErrorf(t, "WEB %s: no deny record:%s", name, describe(li.bySession["prog-web-"+name]))
			}
		}
	}
}
