package calltrace

import (
	"go/ast"
	"go/types"
)

// Reaches reports whether a call of from can reach to, statically: every
// call of from's body (closures included, where they are written),
// through interfaces into every implementation in the module, and on into
// every function of the module it calls. It returns the chain of
// functions that leads there.
func (p *Program) Reaches(from, to *Func) []string {
	seen := map[*types.Func]bool{}
	var path []string
	var walk func(f *Func) bool
	walk = func(f *Func) bool {
		if f.Obj == to.Obj {
			path = append(path, FuncName(p.Module, f.Obj))
			return true
		}
		if seen[f.Obj] {
			return false
		}
		seen[f.Obj] = true
		found := false
		ast.Inspect(f.Decl.Body, func(n ast.Node) bool {
			if found {
				return false
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn, _ := callee(f.Pkg.Info, call)
			if fn == nil {
				return true
			}
			targets := []*types.Func{fn}
			if impls, ok := p.impls[fn]; ok {
				targets = impls
			}
			for _, t := range targets {
				if tf := p.funcs[t]; tf != nil && walk(tf) {
					found = true
					return false
				}
			}
			return true
		})
		if found {
			path = append(path, FuncName(p.Module, f.Obj))
		}
		return found
	}
	if !walk(from) {
		return nil
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// Methods lists the methods the module declares on the named type of
// package pkg (import path relative to the module).
func (p *Program) Methods(pkg, typ string) map[string]*Func {
	out := map[string]*Func{}
	for obj, f := range p.funcs {
		sig := obj.Type().(*types.Signature)
		r := sig.Recv()
		if r == nil || obj.Pkg() == nil || obj.Pkg().Path() != p.Module+"/"+pkg {
			continue
		}
		t := r.Type()
		if pt, ok := t.(*types.Pointer); ok {
			t = pt.Elem()
		}
		if n, ok := t.(*types.Named); ok && n.Obj().Name() == typ {
			out[obj.Name()] = f
		}
	}
	return out
}
