package main

import (
	"strings"
	"testing"
)

// A confinement report is wrapped between its clauses, every character
// kept, no line past the width unless one word is.
func TestWrapList(t *testing.T) {
	in := "landlock abi 7 (scoped signal,abstract_unix_socket), writes /home/alice/agent /tmp /var/tmp /home/alice/.cache/go-build /home/alice/.npm, " +
		"hidden /home/alice/.local/state/aerfs/agent-1a2b3c4d, user+mount+net namespaces (private /tmp), seccomp, no_new_privs, no capabilities, " +
		"sockets via the daemon; kernel: no_new_privs, seccomp filter, own user+mnt+net namespaces, CapEff=0 CapPrm=0 CapBnd=0, " +
		"/a/path/that/is/longer/than/the/whole/width/of/a/line/of/status/output/because/a/session/chose/it/so/very/long/indeed/x"
	lines := wrapList(in, 67)
	if len(lines) < 5 {
		t.Fatalf("not wrapped: %q", lines)
	}
	for _, l := range lines {
		if len(l) > 67 && strings.Contains(l, " ") {
			t.Errorf("line of %d characters: %q", len(l), l)
		}
	}
	if got := strings.Join(lines, " "); strings.ReplaceAll(got, " ", "") != strings.ReplaceAll(in, " ", "") {
		t.Errorf("wrapping lost text:\n%s\n%s", got, in)
	}
}

func TestConfinementSummary(t *testing.T) {
	in := "landlock abi 7 (scoped signal,abstract_unix_socket), writes /home/a/agent /tmp /var/tmp /tmp/aerfs-cache-1, hidden /home/a/.local/state/aerfs/x, " +
		"user+mount+net namespaces (private /tmp /dev/shm), seccomp, no_new_privs, no capabilities, sockets via the daemon; kernel: no_new_privs, seccomp filter, CapEff=0"
	want := "landlock abi 7, writes, hidden, user+mount+net namespaces, seccomp, no_new_privs, no capabilities, sockets via the daemon; " +
		"the kernel shows it (--verbose: every path and what /proc shows)"
	if got := confinementSummary(in); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := confinementSummary("none: --sandbox=off"); got != "none: --sandbox=off" {
		t.Errorf("an unconfined session: %q", got)
	}
}
