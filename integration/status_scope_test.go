package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// statusCall asks the daemon for its status over the control socket
// itself, as any process of a session can.
const statusCall = `
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.write(json.dumps({"op": "status"}) + "\n"); f.flush()
r = json.loads(f.readline())
print(json.dumps(r))
`

// statusAnswer is the part of a status answer the test reads.
type statusAnswer struct {
	OK   bool `json:"ok"`
	Data struct {
		Sessions []struct {
			ID    string `json:"id"`
			Hosts []struct {
				Host string `json:"host"`
			} `json:"hosts"`
		} `json:"sessions"`
	} `json:"data"`
}

func (a statusAnswer) sessions() []string {
	var ids []string
	for _, s := range a.Data.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

// A session asking the daemon's status learns about its own session tree
// only: what another session did — the hosts a WEB session named, its
// taint, its confinement — would reach a clean session without tainting
// it (a host name chosen by injected content, copied into MEMORY.md). The
// owner outside sessions sees every session.
func TestStatusInSessionShowsItsTree(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "# memory\n"}).nameHost("*.invalid", "deny").Mount()
	const host = "chosen-by-web-content.invalid"
	r := e.Sh("WEB", "web", `python3 -c 'import urllib.request
try: urllib.request.urlopen("http://`+host+`/")
except Exception as e: print(e)'`)
	if !strings.Contains(r.Stdout, "RN-deny") {
		t.Fatalf("the WEB session's request was not refused by the proxy: %s", r)
	}
	owner := e.Aerfs("status", "--json")
	expectOK(t, "owner's status", owner)
	if !strings.Contains(owner.Stdout, `"web"`) || !strings.Contains(owner.Stdout, host) {
		t.Fatalf("the owner's status does not show the WEB session and its host:\n%s", owner.Stdout)
	}
	var st struct {
		Socket string `json:"socket"`
	}
	if err := json.Unmarshal([]byte(owner.Stdout), &st); err != nil || st.Socket == "" {
		t.Fatalf("status --json: %v", err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "status.py")
	if err := os.WriteFile(script, []byte(statusCall), 0o644); err != nil {
		t.Fatal(err)
	}
	// A clean session, and a session started from within it: each asks
	// over the socket, and with aerfs status.
	ask := "python3 " + script + " " + st.Socket + "; echo; " + aerfsBin + " status 2>&1"
	call := "python3 " + script + " " + st.Socket
	r = e.Sh("USER", "clean", ask+"; echo ===nested; "+aerfsBin+" run --session nested -- sh -c '"+ask+"'; echo ===after; "+call)
	expectOK(t, "the clean session's status", r)
	outer, rest, _ := strings.Cut(r.Stdout, "===nested")
	nested, after, _ := strings.Cut(rest, "===after")
	if strings.Contains(r.Stdout, host) || strings.Contains(r.Stdout, "web ") || strings.Contains(r.Stdout, `"web"`) {
		t.Errorf("a clean session's status shows the WEB session:\n%s", r.Stdout)
	}
	// Each sees its own session and those started from within it.
	for _, c := range []struct {
		who, out, want string
	}{{"the clean session", outer, "clean"}, {"the nested session", nested, "nested"}, {"the clean session after its nested one", after, "clean,nested"}} {
		var a statusAnswer
		line, _, _ := strings.Cut(strings.TrimSpace(c.out), "\n")
		if err := json.Unmarshal([]byte(line), &a); err != nil || !a.OK {
			t.Fatalf("%s's status answer %q: %v", c.who, line, err)
		}
		if got := strings.Join(a.sessions(), ","); got != c.want {
			t.Errorf("%s's status lists sessions %q, want %q", c.who, got, c.want)
		}
	}
}
