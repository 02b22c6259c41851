package policy

import (
	"strings"
	"testing"
)

func TestSandboxWritable(t *testing.T) {
	p := Default()
	got := strings.Join(p.SandboxWritable("/home/o"), " ")
	if got != "/tmp /var/tmp /home/o/.cache/go-build /home/o/.npm" {
		t.Errorf("default writable = %q", got)
	}
	q, err := Parse("p.yaml", []byte("version: 1\nsandbox:\n  writable: [/scratch, ~/.cargo/registry]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.SandboxWritable("/home/o/"), " "); got != "/scratch /home/o/.cargo/registry" {
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
	if len(q.SandboxWritable("/h")) != 4 {
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
