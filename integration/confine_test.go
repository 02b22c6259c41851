package integration

// What a confined session keeps of the host beyond files: capabilities
// and the owner's services over path sockets (docs/confinement.md).

import (
	"strings"
	"testing"
)

// capLines returns the Cap* lines of a /proc/<pid>/status text.
func capLines(status string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(k, "Cap") {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// With a root owner (the workspace is root's), a confined session is uid 0
// in its user namespace without a single capability: every set empty and
// the securebits locked, so that no execve gives any back. aerfs status
// shows the sets from /proc.
func TestConfineNoCapabilities(t *testing.T) {
	e := newEnv(t, map[string]string{"README": "hi\n"}).Mount()
	r := e.Sh("USER", "caps", `grep ^Cap /proc/self/status; id -u
/usr/bin/python3 -c 'import ctypes; print("securebits", ctypes.CDLL(None).prctl(27, 0, 0, 0, 0))'`)
	expectOK(t, "confined session", r)
	t.Logf("%s", r.Stdout)
	caps := capLines(r.Stdout)
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"} {
		if caps[k] != "0000000000000000" {
			t.Errorf("%s in a confined session of a root owner: %q", k, caps[k])
		}
	}
	// NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and
	// their locks: 0xef.
	if !strings.Contains(r.Stdout, "securebits 239") {
		t.Errorf("securebits not locked: %s", r.Stdout)
	}
	// The same session's process, seen by aerfs status.
	done := make(chan Result, 1)
	go func() { done <- e.Sh("USER", "caps-live", "sleep 3") }()
	var status string
	for i := 0; i < 50; i++ {
		status = e.Aerfs("status").Stdout
		if strings.Contains(status, "CapEff=0 CapPrm=0 CapBnd=0") {
			break
		}
		runCmd("/", nil, "sleep", "0.1")
	}
	<-done
	if !strings.Contains(status, "CapEff=0 CapPrm=0 CapBnd=0") || !strings.Contains(status, "no capabilities") {
		t.Errorf("aerfs status does not show the empty capability sets:\n%s", status)
	}
	// --sandbox=off keeps root's capabilities, as asked.
	r = e.sessionOf("USER", "caps-off", true, "grep ^CapEff /proc/self/status")
	if strings.Contains(r.Stdout, "0000000000000000") {
		t.Errorf("an unconfined root session lost its capabilities: %s", r.Stdout)
	}
}
