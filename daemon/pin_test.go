package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pin that cannot be read refuses the mount and says how to go on.
func TestReadPinCorrupt(t *testing.T) {
	old := PinDir
	PinDir = t.TempDir()
	t.Cleanup(func() { PinDir = old })
	ws := "/some/workspace"
	if p, err := ReadPin(ws); p != nil || err != nil {
		t.Fatalf("no pin: %v %v", p, err)
	}
	if err := os.WriteFile(pinPath(ws), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadPin(ws)
	if err == nil || !strings.Contains(err.Error(), "--new-state") {
		t.Fatalf("corrupt pin: %v", err)
	}
	if err := checkPin(ws, filepath.Join(t.TempDir(), "state")); err == nil {
		t.Fatal("checkPin passed with a corrupt pin")
	}
}
