package policy

import (
	"strings"
	"testing"
)

func TestSandboxWritable(t *testing.T) {
	p := Default()
	got := strings.Join(p.SandboxWritable("/home/o"), " ")
	if got != "/tmp /var/tmp" {
		t.Errorf("default writable = %q", got)
	}
	q, err := Parse("p.yaml", []byte("version: 1\nsandbox:\n  writable: [/scratch, ~/.local/share/scratch]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.SandboxWritable("/home/o/"), " "); got != "/scratch /home/o/.local/share/scratch" {
		t.Errorf("writable = %q", got)
	}
	if !p.SandboxPrivateTmp() {
		t.Error("default has no private /tmp")
	}
	q, err = Parse("p.yaml", []byte("version: 1\nsandbox: {private_tmp: false}\n"))
	if err != nil || q.SandboxPrivateTmp() {
		t.Errorf("private_tmp: false not read: %v", err)
	}
	q, err = Parse("p.yaml", []byte("version: 1\nsandbox:\n  sockets: [/run/nscd/socket, ~/.gnupg/S.gpg-agent]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.SandboxSockets("/home/o"), " "); got != "/run/nscd/socket /home/o/.gnupg/S.gpg-agent" {
		t.Errorf("sockets = %q", got)
	}
	if len(p.SandboxSockets("/home/o")) != 0 {
		t.Errorf("the default policy lets sessions reach path sockets: %v", p.SandboxSockets("/home/o"))
	}
	if q, err = Parse("p.yaml", []byte("version: 1\n")); err != nil || !q.SandboxPrivateTmp() {
		t.Errorf("a policy without a sandbox section has no private /tmp: %v", err)
	}
	q, err = Parse("p.yaml", []byte("version: 1\nsandbox: {network: open}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(q.SandboxWritable("/h")) != 2 {
		t.Errorf("sandbox without writable does not keep the default: %q", q.SandboxWritable("/h"))
	}
	q, _ = Parse("p.yaml", []byte("version: 1\nsandbox: {writable: []}\n"))
	if len(q.SandboxWritable("/h")) != 0 {
		t.Errorf("writable: [] is not empty")
	}
}

func TestSandboxErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"sandbox:\n  writeable: [/tmp]\n", `p.yaml:3: unknown key "writeable"`},
		{"sandbox:\n  writable: [tmp]\n", `p.yaml:3: sandbox.writable "tmp" is relative`},
		{"sandbox:\n  writable:\n    - /tmp\n    - ./x\n", `p.yaml:5: sandbox.writable "./x" is relative`},
		{"sandbox:\n  writable: [~root/x]\n", `p.yaml:3: sandbox.writable "~root/x" names another user's home`},
		{"sandbox:\n  writable: [\"~\"]\n", `p.yaml:3: sandbox.writable "~" is the whole home directory`},
		{"sandbox:\n  writable: [/]\n", `p.yaml:3: sandbox.writable "/" is the whole file system`},
		{"sandbox:\n  writable: [/a/../b]\n", `p.yaml:3: sandbox.writable "/a/../b" is not a clean path`},
		{"sandbox:\n  writable: [/a, /a]\n", `p.yaml:3: sandbox.writable "/a" listed twice`},
		{"sandbox:\n  writable: [\"/tmp/*\"]\n", `p.yaml:3: sandbox.writable "/tmp/*" contains a wildcard`},
		{"sandbox:\n  writable: /tmp\n", `p.yaml:3: sandbox.writable must be a list`},
		// The owner's build and package caches: code the owner's builds
		// run, in them, beneath them or above them.
		{"sandbox:\n  writable: [~/.cache/go-build]\n", `p.yaml:3: sandbox.writable "~/.cache/go-build" is the owner's build or package cache ~/.cache/go-build`},
		{"sandbox:\n  writable: [/tmp, ~/.npm]\n", `p.yaml:3: sandbox.writable "~/.npm" is the owner's build or package cache ~/.npm`},
		{"sandbox:\n  writable: [~/.cache]\n", `p.yaml:3: sandbox.writable "~/.cache" holds the owner's build or package cache ~/.cache/go-build`},
		{"sandbox:\n  writable: [~/go]\n", `p.yaml:3: sandbox.writable "~/go" holds the owner's build or package cache ~/go/pkg/mod`},
		{"sandbox:\n  writable: [~/.cargo/registry]\n", `p.yaml:3: sandbox.writable "~/.cargo/registry" is in the owner's build or package cache ~/.cargo`},
		{"sandbox:\n  private_tmp: yes please\n", `p.yaml:3: sandbox.private_tmp must be true or false`},
		{"sandbox:\n  sockets: [run/nscd/socket]\n", `p.yaml:3: sandbox.sockets "run/nscd/socket" is relative`},
		{"sandbox:\n  sockets: [/run/x, /run/x]\n", `p.yaml:3: sandbox.sockets "/run/x" listed twice`},
		{"sandbox:\n  sockets: /run/x\n", `p.yaml:3: sandbox.sockets must be a list`},
		{"sandbox:\n  network: closed\n", `p.yaml:3: unknown sandbox.network "closed"`},
		{"sandbox: [/tmp]\n", `p.yaml:2: expected a mapping`},
	} {
		_, err := Parse("p.yaml", []byte("version: 1\n"+c.src))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %s…", c.src, err, c.want)
		}
	}
}
