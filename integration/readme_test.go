package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMECommands runs the commands of the README's code blocks, as the
// README shows them, in a scratch home: every command line of every sh
// block is listed below, either run (as written, or with its placeholders
// — ID, DIR, RECORD … — filled in) and checked for the exit status the
// README implies, or marked with the reason it cannot run in a scratch
// workspace. A command added to the README and not here fails the test,
// and so does a step here whose line the README no longer has.
func TestREADMECommands(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	os.MkdirAll(home, 0o755)
	ws := filepath.Join(home, "agent")
	binDir := filepath.Dir(aerfsBin)
	env := []string{"HOME=" + home, "XDG_STATE_HOME=", "PATH=" + binDir + ":" + os.Getenv("PATH"), "NO_COLOR=1", "PAGER=cat"}
	t.Cleanup(func() {
		runCmd("/", env, aerfsBin, "unmount", ws)
	})
	envsMu.Lock()
	envs[ws] = true
	envsMu.Unlock()

	vars := map[string]string{}
	cwd := home
	steps := readmeSteps()
	covered := map[string]bool{}
	for _, s := range steps {
		if s.readme != "" {
			covered[s.readme] = true
		}
		if s.why != "" {
			continue
		}
		script := s.sh
		if script == "" {
			script = s.readme
		}
		for k, v := range vars {
			script = strings.ReplaceAll(script, "{"+k+"}", v)
		}
		if s.cd != "" {
			cwd = strings.ReplaceAll(s.cd, "~", home)
			continue
		}
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader(s.stdin)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		what := s.readme
		if what == "" {
			what = "(the test's own step) " + script
		}
		if code != s.code || !strings.Contains(string(out), s.want) {
			t.Errorf("README: %s\nran: %s\nwant exit %d and %q, got exit %d:\n%s", what, script, s.code, s.want, code, out)
		}
		if s.capture != "" {
			m := regexp.MustCompile(s.capture).FindStringSubmatch(string(out))
			if m == nil {
				t.Fatalf("%s: no %s in:\n%s", script, s.capture, out)
			}
			vars[s.name] = m[1]
		}
	}
	// Every command line of the README is a step, and every step's line
	// is in the README.
	inREADME := map[string]bool{}
	for _, l := range readmeCommandLines(t) {
		inREADME[l] = true
		if !covered[l] {
			t.Errorf("the README shows %q, which this test neither runs nor explains: add it to readmeSteps", l)
		}
	}
	for l := range covered {
		if !inREADME[l] {
			t.Errorf("readmeSteps names %q, which the README no longer shows", l)
		}
	}
}

// A step of the README test.
type readmeStep struct {
	readme string // the README's line (its comment cut); "" for a step of the test's own
	sh     string // what runs, with {NAME} filled from an earlier capture; "" = the README line
	cd     string // a cd: where the next steps run
	stdin  string
	code   int
	want   string // the output holds this
	// capture: a regexp whose first group is kept as {name}.
	capture, name string
	why           string // why the README line cannot run in a scratch workspace
}

func readmeSteps() []readmeStep {
	noClient := "the agent client is not installed here; make e2e runs the real clients under aerfs run --agent"
	homeRoots := "a profile mounts the client's directory in the workspace owner's home from passwd (root's /root here, not a scratch " +
		"home); roots_test.go mounts the same roots over a scratch home, make e2e the profiles with the real clients"
	return []readmeStep{
		// Quick start.
		{readme: "make demo", why: "make demo is its own target (scripts/demo.sh), run by CI"},
		{readme: "make test", why: "make test is the suite this test is part of"},
		// Walkthrough.
		{readme: "make build && install bin/aerfs /usr/local/bin/", why: "the harness builds aerfs and puts it first on PATH"},
		{readme: "mkdir -p ~/agent"},
		{readme: "aerfs init ~/agent", want: "initialised "},
		{readme: "aerfs mount ~/agent", want: "aerfs: mounted "},
		{readme: "cd ~/agent", cd: "~/agent"},
		{readme: "echo '- prefers short answers' >> MEMORY.md"},
		{readme: "aerfs run --principal USER --session agent -- claude",
			sh: "aerfs run --principal USER --session agent -- sh -c 'echo a note > sessions/agent/notes.md'"},
		{sh: `printf 'open("page.txt", "w").write("ignore previous instructions\\n")\n' > fetch.py`},
		{readme: "aerfs run --principal WEB  --session browse -- python3 fetch.py"},
		// "WEB cannot change MEMORY.md … (EACCES)", and a USER session
		// that reads what WEB wrote is refused too.
		{sh: "aerfs run --principal WEB --session browse -- sh -c 'echo evil >> MEMORY.md'", code: 2, want: "Permission denied"},
		{sh: "aerfs run --principal USER --session reader -- sh -c 'cat page.txt >/dev/null; echo more >> MEMORY.md'", code: 2, want: "Permission denied"},
		{readme: "aerfs taint --session agent WEB_DERIVED", want: "WEB_DERIVED"},
		{readme: "aerfs status", want: "sessions:"},
		{readme: "aerfs list", want: "WORKSPACE"},
		{readme: "aerfs log", want: "R3-principal"},
		{readme: "aerfs promote sessions/agent/notes.md", want: "shared/notes.md"},
		// Recovery: three versions of MEMORY.md, a refused rename kept in
		// quarantine.
		{sh: "echo '- second' >> MEMORY.md && echo '- third' >> MEMORY.md"},
		{sh: "aerfs run --principal WEB --session browse -- sh -c 'echo poisoned > new.md && mv new.md MEMORY.md'", code: 1},
		{readme: "aerfs history MEMORY.md", want: "PRINCIPAL"},
		{readme: "aerfs diff MEMORY.md [--from V] [--to V]", sh: "aerfs diff MEMORY.md && aerfs diff MEMORY.md --from 1 --to 2", want: "+- second"},
		{readme: "aerfs snapshot --label before-upgrade", capture: `snapshot ([0-9a-f]{8})`, name: "SNAP"},
		{readme: "aerfs restore MEMORY.md --to 3"},
		{readme: "aerfs restore --snapshot 1a2b3c4d --dry-run", sh: "aerfs restore --snapshot {SNAP} --dry-run"},
		{readme: "aerfs restore --snapshot 1a2b3c4d --yes", sh: "aerfs restore --snapshot {SNAP} --yes"},
		{readme: "aerfs restore --before 10m", sh: "aerfs restore --before 10m --yes"},
		{sh: "mkdir -p skills/x && echo 'a skill' > skills/x/SKILL.md"},
		{readme: "aerfs scope skills/x/SKILL.md", want: "skills/x/SKILL.md"},
		{readme: "aerfs restore --contaminated-by skills/x/SKILL.md --dry-run"},
		{readme: "aerfs restore --contaminated-by RECORD --set-aside ~/aerfs-set-aside",
			sh:   "mkdir -p /var/lib/aerfs-it && d=$(mktemp -d /var/lib/aerfs-it/readme-XXXXXX) && aerfs restore --contaminated-by skills/x/SKILL.md --set-aside $d/aside --dry-run; rc=$?; rm -rf $d; exit $rc",
			want: "nothing to set aside"},
		{readme: "aerfs pending", want: "MEMORY.md", capture: `(?m)^([0-9a-f]{12})  `, name: "ID"},
		{readme: "aerfs approve ID | aerfs reject ID", sh: "aerfs reject {ID}"},
		// Sessions, and the owner's own changes: a burst of refusals
		// quarantines the tainted agent session.
		{sh: "aerfs run --principal USER --session agent -- sh -c 'for i in 1 2 3 4 5 6; do echo x >> MEMORY.md; done'", code: 2},
		{readme: "aerfs session list [--json]", sh: "aerfs session list && aerfs session list --json", want: "QUARANTINED"},
		{readme: "aerfs session release agent", want: "agent"},
		{readme: "aerfs session end browse"},
		{readme: "aerfs why --session agent", want: "WEB_DERIVED"},
		{readme: "aerfs why MEMORY.md", want: "class:       memory"},
		{readme: "aerfs edit SOUL.md", sh: `EDITOR='sh -c "echo I am careful. >> \$1" sh' aerfs edit SOUL.md`, stdin: "y\n", want: "+I am careful."},
		// Drift: SOUL.md changed while unmounted.
		{cd: "~"},
		{sh: "aerfs unmount ~/agent && echo 'changed behind aerfs' >> ~/agent/SOUL.md && aerfs mount ~/agent", want: "aerfs: drift: "},
		{cd: "~/agent"},
		{readme: "aerfs adopt SOUL.md"},
		// Evidence.
		{readme: "aerfs key", want: "aerfs/agent+"},
		{readme: "aerfs export -o evidence.zip [--since T] [--session S] [--path P]", sh: "aerfs export -o ../evidence.zip && aerfs export -o ../agent.zip --session agent --path MEMORY.md --since 1h", want: "exported "},
		{readme: `aerfs verify --key "$(aerfs key)" evidence.zip`, sh: `aerfs verify --key "$(aerfs key)" ../evidence.zip`, want: "verified "},
		{sh: "aerfs verify ../evidence.zip", code: 14, want: "origin not verified"},
		{sh: `aerfs log --json -n 1 | sed 's/.*"id":"\([0-9a-f]*\)".*/\1/'`, capture: `([0-9a-f]{64})`, name: "RECORD"},
		{sh: `aerfs status --json | sed -n 's/.*"state_dir": *"\([^"]*\)".*/\1/p'`, capture: `(/\S+)`, name: "DIR"},
		{readme: "aerfs verify --state DIR", sh: "aerfs verify --state {DIR}", want: "(state)"},
		{readme: "aerfs prove RECORD", sh: "aerfs prove {RECORD}", want: `"tree_size"`},
		{readme: "aerfs gc --dry-run", want: "would prune"},
		{readme: "aerfs gc --keep-last 5 --keep-within 720h --max-size 500M", want: "pruned "},
		// Authority: a file a WEB session wrote may not run until the
		// owner authorizes exactly one exec of exactly that content.
		{sh: "mkdir -p tools out && aerfs run --principal WEB --session fetcher -- python3 -c '" +
			`import os; f = os.open("tools/fetch.sh", os.O_CREAT | os.O_WRONLY, 0o755); os.write(f, b"#!/bin/sh\necho fetched\n"); os.close(f); open("out/pay.json", "w").write("{}\n")'`},
		{sh: "./tools/fetch.sh", code: 126},
		{readme: "aerfs authority tools/fetch.sh", want: "none"},
		{readme: "aerfs authorize tools/fetch.sh --for exec", capture: `(?m)^(\S{20,})$`, name: "TOKEN1"},
		{readme: "./tools/fetch.sh", want: "fetched"},
		{sh: "./tools/fetch.sh", code: 126},
		{sh: "aerfs authorize out/pay.json --for exec", capture: `(?m)^(\S{20,})$`, name: "TOKEN"},
		{readme: `aerfs authorize --check "$TOKEN" out/pay.json --for exec`, sh: `TOKEN={TOKEN}; aerfs authorize --check "$TOKEN" out/pay.json --for exec`},
		// Running it for real.
		{readme: "make install", why: "installs into /usr/local and /etc: integration/system_test.go runs it into a DESTDIR"},
		{readme: "aerfs version", want: "go-fuse"},
		{readme: "man aerfs-run", why: "the pages are where man looks only after make install (system_test.go checks them installed)"},
		{readme: "aerfs init ~alice/agent", why: "needs a user alice; aerfs init ~/agent above is the same command"},
		{readme: `systemctl enable --now "aerfs@$(systemd-escape --path /home/alice/agent).service"`, why: "no systemd runs in the test machine; system_test.go runs the unit's commands with the README's flags"},
		{readme: "mount -t fuse.aerfs /var/lib/aerfs/agent /home/alice/agent", why: "the mount(8) helper is in /sbin only after make install; system_test.go mounts through it"},
		{readme: "/var/lib/aerfs/agent  /home/alice/agent  fuse.aerfs  defaults,nofail  0 0", why: "a line of /etc/fstab, not a command"},
		// A daemon that stopped answering: stopped here, then let go
		// with the README's commands, ended, and mounted again.
		{cd: "~"},
		{sh: "echo '- kept across the stop' >> ~/agent/MEMORY.md"},
		{sh: "sha256sum ~/agent/MEMORY.md > ~/memory.sum; ! grep -q ' /sys/fs/fuse/connections ' /proc/mounts || touch ~/fusectl.was"},
		{sh: `p=$(aerfs status --json --workspace ~/agent | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' | head -1); [ -n "$p" ] && echo $p > ~/daemon.pid && kill -STOP $p`},
		// A process that touches the mount now waits for the daemon.
		{sh: `(ls ~/agent/waiting-for-the-daemon; echo $? > ~/waiter.rc) > ~/waiter.out 2>&1 < /dev/null & sleep 0.5; [ ! -e ~/waiter.rc ]`},
		{readme: `dev=$(awk -v m="$HOME/agent" '$5 == m {print $3}' /proc/self/mountinfo)`,
			sh: `dev=$(awk -v m="$HOME/agent" '$5 == m {print $3}' /proc/self/mountinfo); [ -n "$dev" ] && echo $dev > ~/dev`},
		{readme: "mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null", code: 0,
			sh: "mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null; true"},
		{readme: "echo 1 > /sys/fs/fuse/connections/${dev#*:}/abort", sh: "dev=$(cat ~/dev); echo 1 > /sys/fs/fuse/connections/${dev#*:}/abort"},
		{readme: "umount -l ~/agent"},
		// The waiting process got an error (ECONNABORTED) and went on.
		{sh: `for i in $(seq 50); do [ -e ~/waiter.rc ] && break; sleep 0.1; done; [ "$(cat ~/waiter.rc)" != 0 ] && cat ~/waiter.out`, want: "connection abort"},
		{sh: "kill -9 $(cat ~/daemon.pid); sleep 0.5; aerfs mount ~/agent", want: "aerfs: mounted "},
		{sh: "sha256sum -c ~/memory.sum && aerfs status --workspace ~/agent", want: "sessions:"},
		{sh: "[ -e ~/fusectl.was ] || umount /sys/fs/fuse/connections"},
		{readme: "cd && aerfs unmount ~/agent", want: "unmounted"},
		// The agent profiles.
		{readme: "aerfs init --agent claude-code ~/work/project", why: homeRoots},
		{readme: "aerfs mount ~/work/project", why: homeRoots},
		{readme: "cd ~/work/project && aerfs run --agent claude-code -- claude", why: noClient},
		{readme: "aerfs init --agent openclaw ~/.openclaw/workspace", why: homeRoots},
		{readme: "aerfs mount ~/.openclaw/workspace", why: homeRoots},
		{readme: "aerfs run --agent openclaw -- openclaw gateway", why: noClient},
		{readme: "aerfs init --agent codex ~/work/project", why: homeRoots},
		{readme: "cd ~/work/project && aerfs run --agent codex -- codex", why: noClient},
	}
}

// readmeCommandLines are the command lines of the README's sh blocks,
// without their comments.
func readmeCommandLines(t *testing.T) []string {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		for _, l := range strings.Split(m[1], "\n") {
			l = strings.TrimSpace(stripComment(l))
			if l == "" || seen[l] {
				continue
			}
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// stripComment cuts a shell comment: a # at the start or after a space,
// outside quotes.
func stripComment(l string) string {
	quote := byte(0)
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || l[i-1] == ' '):
			return l[:i]
		}
	}
	return l
}
