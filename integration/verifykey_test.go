package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// verify without --key checks a bundle's integrity but says plainly that
// its origin is not verified and exits 14; with the workspace's key it
// exits 0; with another workspace's key it fails the signature (12).
func TestVerifyWithoutKeySaysOriginUnverified(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "owner write", e.Owner("echo more >> MEMORY.md"))
	out := filepath.Join(t.TempDir(), "b.zip")
	expectOK(t, "export", e.Aerfs("export", "--workspace", e.WS, "-o", out))
	r := e.Aerfs("verify", out)
	if r.Code != 14 || !strings.Contains(r.Stdout, "ORIGIN NOT VERIFIED") || !strings.Contains(r.Stderr, "hint: pass the key you trust: aerfs verify --key") {
		t.Fatalf("verify without --key: %s", r)
	}
	key := strings.TrimSpace(e.Aerfs("key", "--workspace", e.WS).Stdout)
	expectOK(t, "verify with the key", e.Aerfs("verify", "--key", key, out))
	other := newEnv(t, nil)
	otherKey := strings.TrimSpace(other.Aerfs("key", "--state", other.State).Stdout)
	if r := e.Aerfs("verify", "--key", otherKey, out); r.Code != 12 {
		t.Fatalf("verify with another workspace's key: %s", r)
	}
}
