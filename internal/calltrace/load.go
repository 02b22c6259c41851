// Package calltrace follows a value — a guarded path — through aerfs's
// call graph, statically: from an entry function whose parameter holds
// it, every call that passes it on (as an argument, a receiver, or inside
// a value built from it) is a stop, and the callee is followed in turn.
// It is how the tests measure the walk of a guarded commit
// (guard.TestCommitWalk) and check that every FUSE operation reaches the
// label flow (fs.TestEveryOperationFlows). It uses only the standard
// library: packages of the module are type-checked from source, the rest
// is read from the export data `go list -export` leaves in the build
// cache.
package calltrace

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Program is a set of type-checked packages of one module.
type Program struct {
	Fset   *token.FileSet
	Module string
	Pkgs   map[string]*Package // by import path: the module's packages
	funcs  map[*types.Func]*Func
	impls  map[*types.Func][]*types.Func // interface method → concrete methods in the module
}

// Package is one type-checked package of the module.
type Package struct {
	Path  string
	Dir   string
	Files []*ast.File
	Types *types.Package
	Info  *types.Info
}

// Func is a function or method declared in the module.
type Func struct {
	Obj  *types.Func
	Decl *ast.FuncDecl
	Pkg  *Package
}

type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Module     *struct{ Path string }
	DepOnly    bool
}

// Load type-checks the module packages named by patterns (and the module
// packages they import), from dir.
func Load(dir string, patterns ...string) (*Program, error) {
	args := append([]string{"list", "-deps", "-export", "-json"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var all []listed
	dec := json.NewDecoder(out)
	for {
		var l listed
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		all = append(all, l)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	p := &Program{Fset: token.NewFileSet(), Pkgs: map[string]*Package{}, funcs: map[*types.Func]*Func{}}
	exports := map[string]string{}
	for _, l := range all {
		exports[l.ImportPath] = l.Export
		if l.Module != nil && p.Module == "" && !l.DepOnly {
			p.Module = l.Module.Path
		}
	}
	ext := importer.ForCompiler(p.Fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	imp := importerFunc(func(path string) (*types.Package, error) {
		if pk, ok := p.Pkgs[path]; ok {
			return pk.Types, nil
		}
		return ext.Import(path)
	})
	// go list -deps lists every package after the packages it imports.
	for _, l := range all {
		if l.Module == nil || l.Module.Path != p.Module {
			continue
		}
		pk := &Package{Path: l.ImportPath, Dir: l.Dir}
		for _, name := range l.GoFiles {
			f, err := parser.ParseFile(p.Fset, filepath.Join(l.Dir, name), nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			pk.Files = append(pk.Files, f)
		}
		pk.Info = &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{},
			Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp}
		tp, err := conf.Check(l.ImportPath, p.Fset, pk.Files, pk.Info)
		if err != nil {
			return nil, fmt.Errorf("type-checking %s: %w", l.ImportPath, err)
		}
		pk.Types = tp
		p.Pkgs[l.ImportPath] = pk
		for _, f := range pk.Files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
					if obj, ok := pk.Info.Defs[fd.Name].(*types.Func); ok {
						p.funcs[obj] = &Func{Obj: obj, Decl: fd, Pkg: pk}
					}
				}
			}
		}
	}
	p.indexImpls()
	return p, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// indexImpls maps every method of every interface the module declares to
// the module's concrete methods that implement it. A call through an
// interface declared elsewhere (go-fuse's file handle interfaces) is not
// followed into the module: the value behind it is the other package's.
func (p *Program) indexImpls() {
	p.impls = map[*types.Func][]*types.Func{}
	var named []*types.Named
	for _, pk := range p.Pkgs {
		for _, name := range pk.Types.Scope().Names() {
			if tn, ok := pk.Types.Scope().Lookup(name).(*types.TypeName); ok {
				if n, ok := tn.Type().(*types.Named); ok && !types.IsInterface(n) {
					named = append(named, n)
				}
			}
		}
	}
	seen := map[*types.Interface]bool{}
	for _, pk := range p.Pkgs {
		for _, sel := range pk.Info.Selections {
			fn, ok := sel.Obj().(*types.Func)
			if !ok {
				continue
			}
			iface, ok := sel.Recv().Underlying().(*types.Interface)
			if !ok || seen[iface] || fn.Pkg() == nil || !strings.HasPrefix(fn.Pkg().Path(), p.Module) {
				continue
			}
			seen[iface] = true
			for _, n := range named {
				ptr := types.NewPointer(n)
				if !types.Implements(ptr, iface) {
					continue
				}
				ms := types.NewMethodSet(ptr)
				for i := 0; i < iface.NumMethods(); i++ {
					m := iface.Method(i)
					if s := ms.Lookup(m.Pkg(), m.Name()); s != nil {
						if impl, ok := s.Obj().(*types.Func); ok {
							p.impls[m] = append(p.impls[m], impl)
						}
					}
				}
			}
		}
	}
}

// Lookup finds the function or method named "pkg.Name" or
// "pkg.(*Type).Name" (pkg relative to the module: "guard", "fs").
func (p *Program) Lookup(name string) *Func {
	for obj, f := range p.funcs {
		if FuncName(p.Module, obj) == name {
			return f
		}
	}
	return nil
}

// FuncName names a function relative to module: "guard.(*Door).Commit".
func FuncName(module string, fn *types.Func) string {
	pkg := strings.TrimPrefix(strings.TrimPrefix(fn.Pkg().Path(), module), "/")
	sig := fn.Type().(*types.Signature)
	if r := sig.Recv(); r != nil {
		t := r.Type()
		star := ""
		if pt, ok := t.(*types.Pointer); ok {
			t, star = pt.Elem(), "*"
		}
		if n, ok := t.(*types.Named); ok {
			return fmt.Sprintf("%s.(%s%s).%s", pkg, star, n.Obj().Name(), fn.Name())
		}
	}
	return pkg + "." + fn.Name()
}
