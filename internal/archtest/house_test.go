package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// rooms is what each package of the guard's house (docs/architecture.md)
// may import of the module, directly: each room stands on the floors
// below it and never reaches up. The FUSE nodes see the doors and the few
// types their handles carry; the daemon sees the facade and the types it
// hands over (the label journal it opens, the recorder, explanations).
var rooms = map[string][]string{
	"backing":        {},
	"guard/label":    {"authority", "policy"},
	"guard/ledger":   {"evidence", "policy", "principal"},
	"guard/tracking": {"backing", "evidence", "guard/label", "guard/ledger", "principal"},
	"guard/draft":    {"backing", "guard/label", "guard/tracking", "principal"},
	"guard/flow":     {"authority", "evidence", "guard/label", "guard/ledger", "guard/tracking", "policy", "principal"},
	"guard/gate":     {"authority", "backing", "evidence", "guard/flow", "guard/label", "guard/ledger", "guard/tracking", "policy", "principal"},
	"guard/txn":      {"backing", "evidence", "guard/label", "guard/ledger", "guard/tracking", "policy"},
	"guard/recovery": {"backing", "evidence", "guard/flow", "guard/label", "guard/ledger", "guard/tracking", "guard/txn", "policy"},
	"guard/explain":  {"authority", "evidence", "guard/label", "guard/ledger", "policy", "principal"},
	"guard": {"authority", "backing", "evidence", "guard/draft", "guard/explain", "guard/flow", "guard/gate", "guard/label",
		"guard/ledger", "guard/recovery", "guard/tracking", "guard/txn", "policy", "principal"},
	"fs": {"backing", "guard", "guard/draft", "guard/label", "guard/txn", "policy"},
}

// guardFor is what of the guard a package outside the house may import:
// the facade and the types it hands over.
var guardFor = map[string][]string{
	"daemon":    {"guard", "guard/explain", "guard/label", "guard/ledger"},
	"cmd/aerfs": {"guard/explain"},
}

func imports(t *testing.T, pkg string) []string {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", mod+pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var in []string
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, mod) {
			in = append(in, strings.TrimPrefix(imp, mod))
		}
	}
	return in
}

// TestHouseLayering holds the rooms of the guard to the imports the table
// above allows them, the rooms free of go-fuse (only fs speaks FUSE), and
// the daemon to the facade.
func TestHouseLayering(t *testing.T) {
	for pkg, allowed := range rooms {
		ok := map[string]bool{}
		for _, a := range allowed {
			ok[a] = true
		}
		for _, imp := range imports(t, pkg) {
			if !ok[imp] {
				t.Errorf("%s imports %s: not a floor below it (docs/architecture.md)", pkg, imp)
			}
		}
		if pkg == "fs" {
			continue
		}
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "github.com/hanwen/go-fuse") {
			t.Errorf("%s depends on go-fuse: only fs speaks FUSE", pkg)
		}
	}
	for pkg, allowed := range guardFor {
		ok := map[string]bool{}
		for _, a := range allowed {
			ok[a] = true
		}
		for _, imp := range imports(t, pkg) {
			if (imp == "guard" || strings.HasPrefix(imp, "guard/")) && !ok[imp] {
				t.Errorf("%s imports %s: it talks to the guard through its facade (package guard)", pkg, imp)
			}
		}
	}
}

// TestHouseSizes holds the house to its sizes: no type of fs, backing or
// the guard with more than 40 methods, no file there over 600 lines, and
// the daemon's facade (guard.Guard) at most 12 exported methods.
func TestHouseSizes(t *testing.T) {
	var files []string
	for _, dir := range []string{"fs", "backing", "guard", "guard/*"} {
		m, _ := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("found only %d files of the house", len(files))
	}
	fset := token.NewFileSet()
	methods := map[string]int{}
	exported := map[string]int{}
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := fset.File(f.Pos()).LineCount(); n > 600 {
			t.Errorf("%s has %d lines (at most 600)", file, n)
		}
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			id, ok := typ.(*ast.Ident)
			if !ok {
				continue
			}
			key := filepath.Base(filepath.Dir(file)) + "." + id.Name
			methods[key]++
			if fd.Name.IsExported() {
				exported[key]++
			}
		}
	}
	var keys []string
	for k := range methods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	most := ""
	for _, k := range keys {
		if methods[k] > 40 {
			t.Errorf("%s has %d methods (at most 40)", k, methods[k])
		}
		if most == "" || methods[k] > methods[most] {
			most = k
		}
	}
	t.Logf("%d files, the largest type %s with %d methods; guard.Guard %d exported methods", len(files), most, methods[most], exported["guard.Guard"])
	// A handful: the doors, the policy, status and explanations, the
	// owner's changes, promotion, drift, expectations, authority,
	// release of a quarantine, and Close at the mount's end.
	if n := exported["guard.Guard"]; n == 0 || n > 13 {
		t.Errorf("the facade guard.Guard has %d exported methods (at most 13)", n)
	}
}
