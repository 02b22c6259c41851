package integration

import "testing"

// rust-toolchain.toml names the cargo and rustc the owner's next build
// runs ([toolchain] path): it is control class at any depth, so a WEB
// session cannot write one (R3-principal) and the owner's cargo keeps its
// own toolchain.
func TestRustToolchainIsControl(t *testing.T) {
	e := newEnv(t, map[string]string{"crate/Cargo.toml": "[package]\nname = \"c\"\n", "crate/src/main.rs": "fn main() {}\n"}).Mount()
	for _, rel := range []string{"crate/rust-toolchain.toml", "rust-toolchain"} {
		e.Sh("WEB", "w1", "printf '[toolchain]\\npath = \"/var/tmp/tc\"\\n' > "+rel)
		if e.Exists(rel) {
			t.Errorf("a WEB session wrote %s", rel)
		}
		if !hasRule(e.Denials(rel), "R3-principal") {
			t.Errorf("no R3-principal refusal of %s: %s", rel, describe(e.Denials(rel)))
		}
	}
}
