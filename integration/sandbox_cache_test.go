package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The owner's build and package caches hold code the owner's own builds
// run without building it again: a session that writes an entry of the
// owner's Go build cache has the owner's next go build link its object.
// No confined session may write them; each gets caches of its own instead
// (GOCACHE, npm_config_cache, PIP_CACHE_DIR … point into them), which no
// other session and not the owner sees.
func TestSandboxSharedCaches(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	owned := []string{".cache/go-build", ".npm", ".cache/pip", ".cache/yarn"}
	for _, d := range owned {
		expectOK(t, "the owner's cache ~/"+d, s.asOwner("sh", "-c", `mkdir -p "$HOME/`+d+`" && echo owner > "$HOME/`+d+`/owner-entry"`))
	}
	attack := `
for d in ` + strings.Join(owned, " ") + `; do
  if echo poison > "$HOME/$d/owner-entry" 2>/dev/null || echo poison > "$HOME/$d/new-entry" 2>/dev/null; then echo "$d written"; else echo "$d refused"; fi
done
echo "gocache $GOCACHE"
echo "npmcache $npm_config_cache"
echo "pipcache $PIP_CACHE_DIR"
mkdir -p "$GOCACHE" "$npm_config_cache" "$PIP_CACHE_DIR" && echo "$AERFS_SESSION" > "$GOCACHE/mine" && echo "own ok"
`
	first := s.session("WEB", "web", attack)
	t.Logf("confined WEB session:\n%s%s", first.Stdout, first.Stderr)
	got := parseAttempts(first.Stdout)
	for _, d := range owned {
		if got[d] != "refused" {
			t.Errorf("the owner's cache ~/%s from a confined session: %q, want refused", d, got[d])
		}
		if b, _ := os.ReadFile(filepath.Join(s.home, d, "owner-entry")); string(b) != "owner\n" {
			t.Errorf("the owner's cache entry in ~/%s was changed: %q", d, b)
		}
		if _, err := os.Stat(filepath.Join(s.home, d, "new-entry")); err == nil {
			t.Errorf("a confined session added an entry to the owner's cache ~/%s", d)
		}
	}
	if got["own"] != "ok" {
		t.Fatalf("the session could not write caches of its own: %s", first)
	}
	for _, k := range []string{"gocache", "npmcache", "pipcache"} {
		if v := got[k]; !filepath.IsAbs(v) || strings.HasPrefix(v, s.home+"/") {
			t.Errorf("%s of a confined session is %q: want a directory of its own, outside the owner's home", k, v)
		}
	}
	// Another session, and the owner, see nothing of the first one's.
	second := s.session("USER", "clean", `cat "`+got["gocache"]+`/mine" 2>/dev/null && echo "saw web's cache"; echo "gocache $GOCACHE"; ls "$GOCACHE" 2>/dev/null | wc -l`)
	t.Logf("second session:\n%s%s", second.Stdout, second.Stderr)
	if strings.Contains(second.Stdout, "saw web's cache") {
		t.Errorf("a second session read the first one's build cache")
	}
	if b, err := os.ReadFile(filepath.Join(got["gocache"], "mine")); err == nil {
		t.Errorf("the owner sees the session's build cache entry: %q", b)
	}
}

// With private_tmp: false a session's cache directory lies in the shared
// /tmp, covered in the session's own view by a tmpfs of its own: another
// session and the owner, looking at the same path while the session
// lives, see an empty directory, and what they put there the session
// never sees.
func TestSandboxCachesSharedTmp(t *testing.T) {
	e := newEnv(t, map[string]string{"README": "hi\n"})
	pol := filepath.Join(e.State, "aerfs.yaml")
	b, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "\n  private_tmp: true\n", "\n  private_tmp: false\n", 1))
	if err := os.WriteFile(pol, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Mount()
	shared := sharedTempDir(t)
	done := make(chan Result, 1)
	go func() {
		done <- e.Sh("WEB", "web", `echo web > "$GOCACHE/mine" 2>/dev/null || { mkdir -p "$GOCACHE" && echo web > "$GOCACHE/mine"; }
echo "$AERFS_CACHE" > `+shared+`/path
for i in $(seq 200); do test -e `+shared+`/go && break; sleep 0.1; done
ls -A "$AERFS_CACHE" "$GOCACHE" > `+shared+`/web-sees`)
	}()
	waitFor(t, "the WEB session's cache path", func() bool { return fileExists(filepath.Join(shared, "path")) })
	b, _ = os.ReadFile(filepath.Join(shared, "path"))
	cache := strings.TrimSpace(string(b))
	if !strings.HasPrefix(cache, "/tmp/aerfs-cache-") {
		t.Fatalf("the WEB session's cache is %q, want a directory in /tmp", cache)
	}
	r := e.Sh("USER", "clean", `cat "`+cache+`/go-build/mine" 2>/dev/null && echo "saw web's entry"; mkdir -p "`+cache+`/go-build" && echo clean > "`+cache+`/go-build/theirs" && echo "put an entry"`)
	t.Logf("clean session: %s", r)
	if strings.Contains(r.Stdout, "saw web's entry") {
		t.Errorf("a second session read the WEB session's build cache")
	}
	if b, err := os.ReadFile(filepath.Join(cache, "go-build", "mine")); err == nil && strings.Contains(string(b), "web") {
		t.Errorf("the owner sees the WEB session's build cache entry")
	}
	os.WriteFile(filepath.Join(shared, "go"), nil, 0o644)
	if w := <-done; w.Code != 0 {
		t.Fatalf("the WEB session: %s", w)
	}
	sees, _ := os.ReadFile(filepath.Join(shared, "web-sees"))
	if !strings.Contains(string(sees), "mine") || strings.Contains(string(sees), "theirs") {
		t.Errorf("the WEB session's own cache holds:\n%s\nwant its own entry only", sees)
	}
}
