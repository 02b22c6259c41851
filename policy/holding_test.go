package policy

import "testing"

// A held path keeps the class it is held at; every other path, and the
// policy it was made from, are unchanged. A policy with another policy's
// namespace roots takes them and nothing else.
func TestHolding(t *testing.T) {
	p, err := Parse("t.yaml", []byte(`version: 1
classes:
  identity: ["SOUL.md"]
  memory: ["notes.md", "memory/**"]
  control: ["skills/**"]
  secret: ["*.token"]
`))
	if err != nil {
		t.Fatal(err)
	}
	h := p.Holding(map[string]Class{"notes.md": Plain, "memory/a.md": Secret, "skills/x/SKILL.md": Plain, "a.token": Plain, "SOUL.md": Memory})
	for rel, want := range map[string]Class{
		"notes.md": Plain, "memory/a.md": Secret, "memory/b.md": Memory, "skills/x/SKILL.md": Plain,
		"skills/y/SKILL.md": Control, "a.token": Plain, "b.token": Secret, "SOUL.md": Memory, "other.md": Plain,
	} {
		if got, _, _ := h.Classify(rel); got != want {
			t.Errorf("held policy: %s is %v, want %v", rel, got, want)
		}
	}
	if c, _, _ := p.Classify("notes.md"); c != Memory || p.Held("notes.md") || !h.Held("notes.md") {
		t.Errorf("the policy a held one was made from changed: notes.md %v, held %v", c, p.Held("notes.md"))
	}
	if p.Holding(nil) != p {
		t.Errorf("holding nothing made a new policy")
	}
	q, err := Parse("q.yaml", []byte("version: 1\nnamespaces:\n  shared: pub\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ns, _ := q.Classify("pub/x.md"); ns != NSShared {
		t.Fatalf("pub/x.md under a policy naming pub shared: namespace %v", ns)
	}
	k := q.WithNamespacesOf(p)
	if _, ns, _ := k.Classify("pub/x.md"); ns != NSNone {
		t.Errorf("with the first policy's roots, pub/x.md is still in namespace %v", ns)
	}
	if c, _, _ := k.Classify("MEMORY.md"); c != Memory || q.WithNamespacesOf(q) != q {
		t.Errorf("WithNamespacesOf changed more than the roots")
	}
}

// Only a session's namespace and the shared one are entered.
func TestNamespaceEntered(t *testing.T) {
	for _, ns := range []Namespace{NSNone, NSSessionsRoot, NSSession, NSShared} {
		if want := ns == NSSession || ns == NSShared; ns.Entered() != want {
			t.Errorf("%v.Entered() = %v", ns, ns.Entered())
		}
	}
}
