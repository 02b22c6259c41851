package policy

import (
	"fmt"
	"strings"
	"testing"
)

func TestAuthorityKeys(t *testing.T) {
	p, err := Parse("a.yaml", []byte("version: 1\nattestors:\n  erp: {domain: finance}\n  bank: {domain: bank}\nelevation: {k: 3, exec: 2}\nagent_scripts: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := p.Authority()
	if a.Attestors["erp"] != "finance" || a.Attestors["bank"] != "bank" || a.K != 3 || a.KFor["exec"] != 2 || !a.AgentScripts {
		t.Fatalf("authority settings: %+v", a)
	}
	if d := Default().Authority(); len(d.Attestors) != 0 || d.K != 0 || d.AgentScripts {
		t.Fatalf("default authority settings: %+v", d)
	}
	// The bounds are inclusive: one attestation domain, or sixteen.
	for _, k := range []int{1, 16} {
		q, err := Parse("k.yaml", []byte(fmt.Sprintf("version: 1\nelevation: {k: %d, promote: %d}\n", k, k)))
		if err != nil || q.Authority().K != k || q.Authority().KFor["promote"] != k {
			t.Errorf("elevation k %d: %v", k, err)
		}
	}
	for _, bad := range []string{
		"attestors: {erp: {domain: \"\"}}",
		"attestors: {erp: {realm: x}}",
		"attestors: [erp]",
		"elevation: {k: 0}",
		"elevation: {k: 17}",
		"elevation: {control: -1}",
		"elevation: {k: many}",
		"elevation: {run: 2}",
		"agent_scripts: maybe",
	} {
		if _, err := Parse("a.yaml", []byte("version: 1\n"+bad+"\n")); err == nil || !strings.Contains(err.Error(), "a.yaml:") {
			t.Errorf("%s: want a located error, got %v", bad, err)
		}
	}
}
