package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The owner's report of their own workspace is verified as aerfs verify
// --state verifies the live log: against the state directory's key. When
// verify says verified, the page does not say "origin not verified" in red;
// it says which key it checked, with the fingerprint aerfs key prints. As
// root (the state readable) and as the owner (the daemon exports the log
// and says the key).
func TestReportOwnWorkspaceVerifiedAsVerifySays(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "# memory\n"}).Mount()
	expectOK(t, "owner edits MEMORY.md", e.Owner("echo '- likes tea' >> MEMORY.md"))
	expectFail(t, "WEB appends to MEMORY.md", e.Sh("WEB", "w1", "echo evil >> MEMORY.md"))

	v := e.Aerfs("verify")
	if v.Code != 0 || !strings.Contains(v.Stdout, "(state)") {
		t.Fatalf("aerfs verify --state of the live log: want exit 0, verified with the state's key: %s", v)
	}
	key := e.mustAerfs("key", "--state", e.State, "--workspace", e.WS).Stdout
	fp := fingerprint(key)
	out := filepath.Join(t.TempDir(), "own.html")
	r := e.Aerfs("report", "-o", out)
	expectOK(t, "aerfs report of the owner's workspace", r)
	checkOwnReport(t, r, readFile(t, out), fp)

	// The owner of a root daemon's state: the daemon exports and says
	// the key.
	s := newOwnedEnv(t, map[string]string{"MEMORY.md": "# memory\n"})
	if r := s.asOwner("sh", "-c", "echo 'owner line' >> MEMORY.md"); r.Code != 0 {
		t.Fatalf("owner's append: %s", r)
	}
	if r := s.asOwner(aerfsBin, "verify"); r.Code != 0 {
		t.Fatalf("the owner's aerfs verify: %s", r)
	}
	okey := s.asOwner(aerfsBin, "key")
	if okey.Code != 0 {
		t.Fatalf("the owner's aerfs key: %s", okey)
	}
	dir := filepath.Join(s.home, "report-"+filepath.Base(s.WS))
	os.MkdirAll(dir, 0o755)
	os.Chown(dir, s.uid, s.gid)
	t.Cleanup(func() { os.RemoveAll(dir) })
	page := filepath.Join(dir, "own.html")
	r = s.asOwner(aerfsBin, "report", "-o", page)
	if r.Code != 0 {
		t.Fatalf("the owner's aerfs report: %s", r)
	}
	checkOwnReport(t, r, readFile(t, page), fingerprint(okey.Stdout))
}

func checkOwnReport(t *testing.T, r Result, page, fp string) {
	t.Helper()
	if strings.Contains(page, "origin not verified") || strings.Contains(page, `class="trust unpinned"`) {
		t.Errorf("the report of the owner's own workspace says origin not verified, while aerfs verify says verified")
	}
	for _, want := range []string{"the state directory's key", "as aerfs verify --state does", fp} {
		if !strings.Contains(page, want) {
			t.Errorf("the trust statement lacks %q", want)
		}
	}
	if !strings.Contains(r.Stdout, "origin verified with the state directory's key") {
		t.Errorf("aerfs report does not say how it verified: %s", r)
	}
}

func fingerprint(key string) string {
	s := sha256.Sum256([]byte(strings.TrimSpace(key)))
	return hex.EncodeToString(s[:])
}
