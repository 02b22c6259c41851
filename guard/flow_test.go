package guard

import (
	"go/ast"
	"go/types"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/internal/calltrace"
)

// computed are the fields of a label the label flow computes: what the
// content is. The others bind it to its content (hash, record,
// fingerprint), which the rooms that store a label fill in.
var computed = map[string]bool{"Origin": true, "Taint": true, "Session": true, "Kind": true, "Stamp": true}

// TestLabelsFlowInOnePlace fails when code of the guard or of the FUSE
// nodes outside guard/flow (and guard/label, the type's own package)
// builds a label or sets what one says of its content: labels change in
// one place, flow.Next.
func TestLabelsFlowInOnePlace(t *testing.T) {
	p, err := calltrace.Load("..", "./fs", "./guard/...")
	if err != nil {
		t.Fatal(err)
	}
	const labelPkg = "github.com/aerfs/aerfs/guard/label"
	isLabel := func(tp types.Type) bool {
		if pt, ok := tp.(*types.Pointer); ok {
			tp = pt.Elem()
		}
		n, ok := tp.(*types.Named)
		return ok && n.Obj().Name() == "Label" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == labelPkg
	}
	checked := 0
	for path, pk := range p.Pkgs {
		if path == labelPkg || strings.HasSuffix(path, "/guard/flow") || !(strings.HasSuffix(path, "/fs") || strings.Contains(path, "/guard")) {
			continue
		}
		checked++
		for _, f := range pk.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CompositeLit:
					if isLabel(pk.Info.TypeOf(x)) {
						t.Errorf("%s: builds a label outside the label flow", p.Fset.Position(x.Pos()))
					}
				case *ast.AssignStmt:
					for _, l := range x.Lhs {
						if sel, ok := l.(*ast.SelectorExpr); ok && computed[sel.Sel.Name] && isLabel(pk.Info.TypeOf(sel.X)) {
							t.Errorf("%s: sets a label's %s outside the label flow", p.Fset.Position(sel.Pos()), sel.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
	if checked < 8 {
		t.Fatalf("checked only %d packages", checked)
	}
}
