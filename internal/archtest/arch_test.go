// Package archtest checks the layering of DESIGN.md §10 mechanically: the
// decision core and the evidence format know nothing of FUSE or the OS
// plumbing above them.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/aerfs/aerfs/"

var forbidden = map[string][]string{
	"policy":    {mod + "fs", mod + "principal", mod + "daemon", mod + "evidence", mod + "cmd", "github.com/hanwen/go-fuse", "golang.org/x/sys"},
	"evidence":  {mod + "fs", mod + "policy", mod + "principal", mod + "daemon", mod + "cmd", "github.com/hanwen/go-fuse"},
	"principal": {mod + "fs", mod + "daemon", mod + "cmd", "github.com/hanwen/go-fuse"},
	"fs":        {mod + "daemon", mod + "cmd"},
}

// direct lists what a package may not import itself (the standard library
// underneath may, of course, use it).
var direct = map[string][]string{
	"policy": {"os/exec", "net", "syscall", "unsafe"},
}

func TestLayering(t *testing.T) {
	for pkg, bad := range direct {
		out, err := exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			for _, b := range bad {
				if imp == b {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range bad {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s imports %s (directly or not)", pkg, dep)
				}
			}
		}
	}
}
