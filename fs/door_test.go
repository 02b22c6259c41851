package fs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// passThrough lists the go-fuse node interfaces that aerfs's Node takes
// from the embedded LoopbackNode on purpose. Each entry says why the
// operation cannot change a guarded file, reveal a namespace or launder
// taint; anything else go-fuse's loopback implements must be overridden in
// this package, so that a go-fuse upgrade that adds an operation to the
// loopback cannot open a door around the guard's Door without this test
// failing.
var passThrough = map[string]string{
	// Reads the file system's totals; names no file.
	"NodeStatfser": "statfs of the backing file system: no path, no content",
	// Called by go-fuse on the node being forgotten; no file is touched.
	"NodeOnForgetter": "inode bookkeeping inside go-fuse",
	// go-fuse calls Readdir only for nodes without OpendirHandle; aerfs's
	// OpendirHandle serves (and filters) every listing.
	"NodeReaddirer": "unreachable: Node.OpendirHandle answers OPENDIR/READDIR",
}

// TestGateIsTheOnlyDoor fails when go-fuse's LoopbackNode implements a node
// interface that aerfs neither overrides nor lists in passThrough.
func TestGateIsTheOnlyDoor(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/hanwen/go-fuse/v2").Output()
	if err != nil {
		t.Fatalf("go list go-fuse: %v", err)
	}
	ifaces := nodeInterfaces(t, filepath.Join(strings.TrimSpace(string(dir)), "fs", "api.go"))
	if len(ifaces) < 20 {
		t.Fatalf("found only %d node interfaces in go-fuse's api.go: the parser no longer understands it", len(ifaces))
	}
	declared := declaredMethods(t, ".", "Node")
	loop := reflect.TypeOf(&gofs.LoopbackNode{})
	var open []string
	names := make([]string, 0, len(ifaces))
	for name := range ifaces {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		methods := ifaces[name]
		implemented := true
		for _, m := range methods {
			if _, ok := loop.MethodByName(m); !ok {
				implemented = false
			}
		}
		if !implemented {
			continue
		}
		if _, ok := passThrough[name]; ok {
			continue
		}
		for _, m := range methods {
			if !declared[m] {
				open = append(open, name+"."+m)
			}
		}
	}
	if len(open) > 0 {
		t.Errorf("go-fuse's LoopbackNode serves these without aerfs's gate: %s\n"+
			"override them on *Node (through the guard's Door) or list them in passThrough with the reason", strings.Join(open, ", "))
	}
	for name := range passThrough {
		if _, ok := ifaces[name]; !ok {
			t.Errorf("passThrough lists %s, which go-fuse no longer has", name)
		}
	}
}

// nodeInterfaces parses go-fuse's api.go: every `type Node...er interface`
// with the names of its methods.
func nodeInterfaces(t *testing.T, file string) map[string][]string {
	return fuseInterfaces(t, file, "Node")
}

// fuseInterfaces parses go-fuse's api.go: every `type <prefix>...er
// interface` with the names of its methods.
func fuseInterfaces(t *testing.T, file, prefix string) map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok || !strings.HasPrefix(ts.Name.Name, prefix) || !strings.HasSuffix(ts.Name.Name, "er") {
				continue
			}
			for _, m := range it.Methods.List {
				for _, n := range m.Names {
					out[ts.Name.Name] = append(out[ts.Name.Name], n.Name)
				}
			}
		}
	}
	return out
}

// declaredMethods lists the methods declared in dir's non-test Go files on
// the pointer receiver *typ (promoted methods of embedded fields do not
// count).
func declaredMethods(t *testing.T, dir, typ string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == typ {
					out[fd.Name.Name] = true
				}
			}
		}
	}
	return out
}
