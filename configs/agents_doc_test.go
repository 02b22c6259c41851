package configs_test

import (
	"os"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/configs"
	"github.com/aerfs/aerfs/policy"
)

// TestAgentsDocTable reads the tables of docs/agents.md that say, file by
// file, which client reads what and in which class aerfs keeps it, and
// classifies every path with the shipped policy: the workspace rows with
// the default policy, the "~/…" rows with the root of the profile whose
// directory holds them, and checks the rows marked machinery (and only
// those) are the client's machinery there. The doc and the policy cannot
// drift apart.
func TestAgentsDocTable(t *testing.T) {
	b, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	def := policy.Default()
	// The roots of every profile, by the directory they guard.
	roots := map[string]*policy.Policy{}
	for _, name := range configs.Agents() {
		pb, err := configs.AgentPolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Parse(name+".yaml", pb)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Roots() {
			roots[r.Path] = r.Policy
		}
	}
	classes := map[string]policy.Class{"plain": policy.Plain, "identity": policy.Identity, "memory": policy.Memory, "control": policy.Control, "secret": policy.Secret}
	rows, inRoot := 0, 0
	seen := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) != 6 || !strings.HasPrefix(strings.TrimSpace(cols[1]), "`") {
			continue
		}
		// "control, machinery": the class, and the path is the client's
		// own machinery in its root (roots.NAME.machinery).
		class, machinery := strings.CutSuffix(strings.TrimSpace(cols[4]), ", machinery")
		want, ok := classes[class]
		if !ok {
			continue // another table (the profiles)
		}
		path := strings.Trim(strings.TrimSpace(cols[1]), "`")
		if seen[path] {
			t.Errorf("docs/agents.md:%d: %s is listed twice", i+1, path)
		}
		seen[path] = true
		if strings.TrimSpace(cols[2]) == "" || strings.TrimSpace(cols[3]) == "" {
			t.Errorf("docs/agents.md:%d: %s: say who reads it and what it does", i+1, path)
		}
		rows++
		p, rel := def, path
		if strings.HasPrefix(path, "~/") {
			p = nil
			for dir, rp := range roots {
				if r, ok := strings.CutPrefix(path, dir+"/"); ok {
					p, rel = rp, r
				}
			}
			if p == nil {
				t.Errorf("docs/agents.md:%d: %s is in no profile's root", i+1, path)
				continue
			}
			inRoot++
		}
		if got, _, _ := p.Classify(rel); got != want {
			t.Errorf("docs/agents.md:%d: %s is %v under the shipped policy, the table says %v", i+1, path, got, want)
		}
		if got := p.Machinery(rel); got != machinery {
			t.Errorf("docs/agents.md:%d: %s: the shipped policy says machinery %v, the table %v", i+1, path, got, machinery)
		}
	}
	if rows < 100 || inRoot < 10 {
		t.Fatalf("read %d rows (%d in roots) from docs/agents.md: the tables moved or lost their format", rows, inRoot)
	}
	t.Logf("%d rows checked, %d of them in roots", rows, inRoot)
}
