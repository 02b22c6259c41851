package guard

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyTheGateDecides fails when a file of the guard or of the FUSE
// nodes outside guard/gate calls one of the policy's decision functions:
// every verdict they act on is made, and recorded, in one place.
func TestOnlyTheGateDecides(t *testing.T) {
	var files []string
	for _, root := range []string{".", "../fs"} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				files = append(files, p)
			}
			return nil
		})
	}
	fset := token.NewFileSet()
	calls := 0
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var name string
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			case *ast.Ident:
				name = fn.Name
			}
			if !strings.HasPrefix(name, "Decide") {
				return true
			}
			calls++
			if filepath.Dir(file) != "gate" {
				t.Errorf("%s: %s calls %s outside the gate", fset.Position(call.Pos()), file, name)
			}
			return true
		})
	}
	if calls == 0 {
		t.Fatal("no decision calls found at all: the test no longer sees them")
	}
}
