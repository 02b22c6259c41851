package integration

import (
	"strings"
	"testing"
)

// A dentry or attribute the kernel cached for one session must never serve
// another: session a looks right after session b, within any cache
// lifetime, and still sees nothing of sessions/b.
func TestNamespaceNotServedFromKernelCache(t *testing.T) {
	e := newEnv(t, map[string]string{"sessions/b/secret.txt": "b's notes\n"}).Mount()
	script := "for i in 1 2 3 4 5 6 7 8; do stat -c %s sessions/b/secret.txt; ls sessions/b; done"
	for round := 0; round < 5; round++ {
		rb := e.Sh("USER", "b", script)
		expectOK(t, "session b sees its own files", rb)
		ra := e.Sh("USER", "a", "stat sessions/b/secret.txt >/dev/null 2>&1 && echo LEAK-stat; "+
			"ls sessions/b >/dev/null 2>&1 && echo LEAK-ls; cat sessions/b/secret.txt 2>/dev/null && echo LEAK-cat; "+
			"test -e sessions/b && echo LEAK-exists; ls sessions")
		if strings.Contains(ra.Stdout, "LEAK") || strings.Contains(ra.Stdout, "b\n") || strings.Contains(ra.Stdout, "notes") {
			t.Fatalf("round %d: session a saw session b's namespace right after b:\n%s", round, ra)
		}
	}
}

// A guarded file restored behind the kernel's back is seen at once: its
// attributes and content are never cached.
func TestGuardedAttributesNotCached(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "one\n"}).Mount()
	expectOK(t, "snapshot", e.Aerfs("snapshot"))
	snap := strings.TrimSuffix(strings.Fields(e.Aerfs("snapshot").Stdout)[1], ":")
	expectOK(t, "longer", e.Sh("USER", "u", "echo 'a much longer line' > MEMORY.md; stat -c %s MEMORY.md"))
	expectOK(t, "restore", e.Aerfs("restore", "--snapshot", snap))
	r := e.Owner("stat -c %s MEMORY.md; cat MEMORY.md")
	if r.Stdout != "4\none\n" {
		t.Fatalf("after restore: %q", r.Stdout)
	}
}
