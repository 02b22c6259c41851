package policy

import "testing"

// A held path is classified as if the guarded classes did not list it;
// every other path, and the policy it was made from, are unchanged.
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
	h := p.Holding([]string{"notes.md", "memory/a.md", "skills/x/SKILL.md", "a.token", "SOUL.md"})
	for rel, want := range map[string]Class{
		"notes.md": Plain, "memory/a.md": Plain, "memory/b.md": Memory, "skills/x/SKILL.md": Plain,
		"skills/y/SKILL.md": Control, "a.token": Secret, "SOUL.md": Plain, "other.md": Plain,
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
}
