package policy

import (
	"strings"
	"testing"
)

func TestOnDrift(t *testing.T) {
	if Default().OnDrift() != DriftRecord {
		t.Fatal("default on_drift is not record")
	}
	p, err := Parse("p.yaml", []byte("version: 1\non_drift: restore\n"))
	if err != nil || p.OnDrift() != DriftRestore {
		t.Fatalf("on_drift: restore: %v %v", p, err)
	}
	_, err = Parse("p.yaml", []byte("version: 1\non_drift: revert\n"))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:2:") {
		t.Fatalf("bad on_drift: %v", err)
	}
}
