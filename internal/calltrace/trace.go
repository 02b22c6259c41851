package calltrace

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
)

// # What a stop is
//
// The walk follows one value: the guarded path. It starts as the named
// parameters of the entry function. Within a function, a variable — or a
// field of one, the walk tells fields apart — holds the path when it is
// assigned the path, a composite literal that contains it, a string made
// from it (+, strings, path, path/filepath), or the result of a call that
// returns it (a function of the module is read to see whether, and in
// which field, it returns what it was handed).
//
// A value of a type declared outside the scope that is built to hold the
// path (an evidence record) takes it out of the scope: it is listed as an
// exit and not followed further.
//
// A stop is a call, to a function of the scope, that is handed the path:
// an argument or the receiver holds it (in any field). The callee is then
// walked with the parameters that received it. A call through an
// interface is followed into every implementation of the scope; a call
// through a function value is not (a closure's body is walked where it is
// written, in source order). Calls that hand the path to a function
// outside the scope are listed as exits, not walked.

// Stop is one call on a walk.
type Stop struct {
	Depth int
	Func  string // the callee, relative to the module: "guard/txn.(*Txn).Commit"
	File  string // the callee's file, relative to the module root
	At    string // where it is called: file:line
	Again bool   // already on the stack: not walked again
}

// Walk is the walk of a path from an entry.
type Walk struct {
	Entry string
	Stops []Stop
	Exits []string // calls out of the scope that are handed the path
}

// Returns counts the stops whose file is one the walk had left before.
func (w *Walk) Returns() int {
	seen := map[string]bool{}
	n := 0
	prev := ""
	for _, s := range w.Stops {
		if s.File != prev && seen[s.File] {
			n++
		}
		seen[s.File] = true
		prev = s.File
	}
	return n
}

// Files counts the distinct files of the stops.
func (w *Walk) Files() int {
	seen := map[string]bool{}
	for _, s := range w.Stops {
		seen[s.File] = true
	}
	return len(seen)
}

// String prints the walk, one stop a line, indented by depth.
func (w *Walk) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "walk of the path from %s: %d stops in %d files, %d returns to a file already left\n", w.Entry, len(w.Stops), w.Files(), w.Returns())
	for i, s := range w.Stops {
		again := ""
		if s.Again {
			again = " (again)"
		}
		fmt.Fprintf(&b, "%3d %s%s  [%s]  from %s%s\n", i+1, strings.Repeat("  ", s.Depth), s.Func, s.File, s.At, again)
	}
	if len(w.Exits) > 0 {
		fmt.Fprintf(&b, "out of the scope: %s\n", strings.Join(w.Exits, ", "))
	}
	return b.String()
}

// Trace walks the path from entry (its parameters named params hold it);
// scope says which packages (import paths) are walked. With ran, only the
// calls of blocks ran executed are followed (nil: every call).
func (p *Program) Trace(entry *Func, params []string, scope func(pkg string) bool, ran *Executed) *Walk {
	w := &walker{p: p, scope: scope, walk: &Walk{Entry: FuncName(p.Module, entry.Obj)}, exits: map[string]bool{},
		memo: map[string]*summary{}, ran: ran}
	w.walk.Stops = append(w.walk.Stops, Stop{Func: w.walk.Entry, File: w.rel(p.Fset.Position(entry.Decl.Pos()).Filename), At: "entry"})
	in := facts{}
	for _, name := range params {
		in.add(entry.Pkg.Info.Defs[paramIdent(entry.Decl, name)], "")
	}
	w.stack = []*types.Func{entry.Obj}
	w.fn(entry, in, 0)
	return w.walk
}

func paramIdent(d *ast.FuncDecl, name string) *ast.Ident {
	lists := []*ast.FieldList{d.Type.Params}
	if d.Recv != nil {
		lists = append(lists, d.Recv)
	}
	for _, l := range lists {
		for _, f := range l.List {
			for _, n := range f.Names {
				if n.Name == name {
					return n
				}
			}
		}
	}
	return nil
}

// facts says which variables hold the path, and in which field: "" is the
// whole value, "a.b" its field a's field b.
type facts map[types.Object]map[string]bool

func (f facts) add(obj types.Object, path string) bool {
	if obj == nil {
		return false
	}
	m := f[obj]
	if m == nil {
		m = map[string]bool{}
		f[obj] = m
	}
	if m[path] || m[""] {
		return false
	}
	m[path] = true
	return true
}

// paths is a set of field paths of a value that hold the path.
type paths map[string]bool

func join(field, p string) string {
	if p == "" {
		return field
	}
	if field == "" {
		return p
	}
	return field + "." + p
}

// under is what of paths a field selection f keeps.
func (ps paths) under(f string) paths {
	out := paths{}
	for p := range ps {
		switch {
		case p == "" || p == f:
			out[""] = true
		case strings.HasPrefix(p, f+"."):
			out[p[len(f)+1:]] = true
		}
	}
	return out
}

type walker struct {
	p     *Program
	scope func(string) bool
	walk  *Walk
	stack []*types.Func
	exits map[string]bool
	memo  map[string]*summary
	busy  map[*types.Func]bool
	ran   *Executed
}

type summary struct{ results []paths }

// settle finds, to a fixed point, which variables of f's body (closures
// included) hold the path, given in.
func (w *walker) settle(f *Func, in facts) facts {
	info := f.Pkg.Info
	held := facts{}
	for o, m := range in {
		for p := range m {
			held.add(o, p)
		}
	}
	for changed := true; changed; {
		changed = false
		assign := func(lhs ast.Expr, ps paths) {
			if ix, ok := ast.Unparen(lhs).(*ast.IndexExpr); ok && len(w.holds(info, ix.Index, held)) > 0 {
				ps = paths{"": true} // a map keyed by the path holds it
			}
			id, fields := lvalue(info, lhs)
			if id == nil {
				return
			}
			obj := info.ObjectOf(id)
			if obj == nil || w.outsideDeep(obj.Type()) {
				return // a value of a type outside the scope (an evidence record) took it out
			}
			for p := range ps {
				if held.add(obj, join(fields, p)) {
					changed = true
				}
			}
		}
		ast.Inspect(f.Decl.Body, func(n ast.Node) bool {
			switch s := n.(type) {
			case *ast.AssignStmt:
				if len(s.Lhs) == len(s.Rhs) {
					for i := range s.Lhs {
						assign(s.Lhs[i], w.holds(info, s.Rhs[i], held))
					}
				} else if len(s.Rhs) == 1 {
					if call, ok := ast.Unparen(s.Rhs[0]).(*ast.CallExpr); ok {
						for i, l := range s.Lhs {
							assign(l, w.result(info, call, held, i))
						}
					}
				}
			case *ast.ValueSpec:
				for i, v := range s.Values {
					if i < len(s.Names) {
						assign(s.Names[i], w.holds(info, v, held))
					}
				}
			case *ast.SendStmt:
				assign(s.Chan, w.holds(info, s.Value, held))
			case *ast.RangeStmt:
				if ps := w.holds(info, s.X, held); len(ps) > 0 {
					if s.Key != nil {
						assign(s.Key, paths{"": true})
					}
					if s.Value != nil {
						assign(s.Value, paths{"": true})
					}
				}
			}
			return true
		})
	}
	return held
}

// lvalue is the variable an assignment to e changes, and the field path
// within it: x for x, (x, "a.b") for x.a.b, x for x[i] and *x.
func lvalue(info *types.Info, e ast.Expr) (*ast.Ident, string) {
	var fields []string
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.Ident:
			if x.Name == "_" {
				return nil, ""
			}
			for i, j := 0, len(fields)-1; i < j; i, j = i+1, j-1 {
				fields[i], fields[j] = fields[j], fields[i]
			}
			return x, strings.Join(fields, ".")
		case *ast.SelectorExpr:
			if info.Selections[x] == nil {
				return nil, ""
			}
			fields = append(fields, x.Sel.Name)
			e = x.X
		case *ast.IndexExpr:
			fields = nil // an element: the whole
			e = x.X
		case *ast.StarExpr:
			e = x.X
		default:
			return nil, ""
		}
	}
}

// fn walks the body of f, whose variables in in hold the path.
func (w *walker) fn(f *Func, in facts, depth int) {
	held := w.settle(f, in)
	ast.Inspect(f.Decl.Body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if w.ran == nil || w.ran.ran(f.Pkg.Path, w.p.Fset.Position(call.Pos())) {
				w.call(f, call, held, depth+1)
			}
		}
		return true
	})
}

// callee resolves the function a call calls, and its receiver expression.
func callee(info *types.Info, call *ast.CallExpr) (*types.Func, ast.Expr) {
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		f, _ := info.Uses[fn].(*types.Func)
		return f, nil
	case *ast.SelectorExpr:
		if sel := info.Selections[fn]; sel != nil {
			f, _ := sel.Obj().(*types.Func)
			return f, fn.X
		}
		f, _ := info.Uses[fn.Sel].(*types.Func)
		return f, nil
	}
	return nil, nil
}

// bind is what a callee's parameters (and receiver) hold for a call.
func (w *walker) bind(info *types.Info, call *ast.CallExpr, recv ast.Expr, held facts, t *types.Func, tf *Func) (facts, bool) {
	out := facts{}
	any := false
	sig := t.Type().(*types.Signature)
	for i, a := range call.Args {
		ps := w.holds(info, a, held)
		if len(ps) == 0 {
			continue
		}
		any = true
		pi := i
		if sig.Variadic() && pi >= sig.Params().Len()-1 {
			pi = sig.Params().Len() - 1
			ps = paths{"": true}
		}
		if tf != nil && pi < sig.Params().Len() {
			if id := paramIdent(tf.Decl, sig.Params().At(pi).Name()); id != nil {
				for p := range ps {
					out.add(tf.Pkg.Info.Defs[id], p)
				}
			}
		}
	}
	if recv != nil {
		if ps := w.holds(info, recv, held); len(ps) > 0 {
			any = true
			if tf != nil && tf.Decl.Recv != nil && len(tf.Decl.Recv.List) > 0 && len(tf.Decl.Recv.List[0].Names) > 0 {
				for p := range ps {
					out.add(tf.Pkg.Info.Defs[tf.Decl.Recv.List[0].Names[0]], p)
				}
			}
		}
	}
	return out, any
}

// call follows one call of f's body if it is handed the path.
func (w *walker) call(f *Func, call *ast.CallExpr, held facts, depth int) {
	info := f.Pkg.Info
	fn, recv := callee(info, call)
	if fn == nil {
		return // a conversion, a builtin or a function value
	}
	targets := []*types.Func{fn}
	if impls, ok := w.p.impls[fn]; ok {
		targets = impls
	}
	at := w.p.Fset.Position(call.Pos())
	for _, t := range targets {
		tf := w.p.funcs[t]
		in, any := w.bind(info, call, recv, held, t, tf)
		if !any {
			return
		}
		if t.Pkg() == nil || !w.scope(t.Pkg().Path()) || tf == nil {
			if t.Pkg() != nil {
				name := FuncName(w.p.Module, t)
				if !w.exits[name] {
					w.exits[name] = true
					w.walk.Exits = append(w.walk.Exits, name)
				}
			}
			continue
		}
		s := Stop{Depth: depth, Func: FuncName(w.p.Module, t), File: w.rel(w.p.Fset.Position(tf.Decl.Pos()).Filename),
			At: fmt.Sprintf("%s:%d", w.rel(at.Filename), at.Line)}
		for _, x := range w.stack {
			if x == t {
				s.Again = true
			}
		}
		w.walk.Stops = append(w.walk.Stops, s)
		if s.Again {
			continue
		}
		w.stack = append(w.stack, t)
		w.fn(tf, in, depth)
		w.stack = w.stack[:len(w.stack)-1]
	}
}

// outsideDeep reports whether t is, or is a pointer, slice, array or map
// of, a named type declared outside the scope.
func (w *walker) outsideDeep(t types.Type) bool {
	for {
		switch x := t.(type) {
		case *types.Pointer:
			t = x.Elem()
		case *types.Slice:
			t = x.Elem()
		case *types.Array:
			t = x.Elem()
		case *types.Map:
			t = x.Elem()
		default:
			return w.outside(t)
		}
	}
}

// outside reports whether t is a named type declared outside the scope.
func (w *walker) outside(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Pkg() != nil && !w.scope(n.Obj().Pkg().Path())
}

func (w *walker) rel(file string) string {
	for _, pk := range w.p.Pkgs {
		if filepath.Dir(file) == pk.Dir {
			return strings.TrimPrefix(strings.TrimPrefix(pk.Path, w.p.Module), "/") + "/" + filepath.Base(file)
		}
	}
	return file
}

// holds is which field paths of e's value hold the path (empty: none).
func (w *walker) holds(info *types.Info, e ast.Expr, held facts) paths {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		out := paths{}
		if obj := info.ObjectOf(x); obj != nil && w.outsideDeep(obj.Type()) {
			return out
		}
		for p := range held[info.ObjectOf(x)] {
			out[p] = true
		}
		return out
	case *ast.SelectorExpr:
		if info.Selections[x] == nil {
			return nil // a package-qualified name
		}
		if info.Selections[x].Kind() != types.FieldVal {
			return nil // a method value
		}
		return w.holds(info, x.X, held).under(x.Sel.Name)
	case *ast.CompositeLit:
		out := paths{}
		defer func() {
			if len(out) > 0 && w.outside(info.TypeOf(x)) {
				name := types.TypeString(info.TypeOf(x), func(p *types.Package) string {
					return strings.TrimPrefix(strings.TrimPrefix(p.Path(), w.p.Module), "/")
				}) + "{…}"
				if !w.exits[name] {
					w.exits[name] = true
					w.walk.Exits = append(w.walk.Exits, name)
				}
				clear(out)
			}
		}()
		for i, el := range x.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if _, isStruct := info.TypeOf(x).Underlying().(*types.Struct); isStruct {
					if id, ok := kv.Key.(*ast.Ident); ok {
						for p := range w.holds(info, kv.Value, held) {
							out[join(id.Name, p)] = true
						}
						continue
					}
				}
				if len(w.holds(info, kv.Key, held)) > 0 || len(w.holds(info, kv.Value, held)) > 0 {
					out[""] = true
				}
			} else if ps := w.holds(info, el, held); len(ps) > 0 {
				if st, isStruct := info.TypeOf(x).Underlying().(*types.Struct); isStruct && i < st.NumFields() {
					for p := range ps {
						out[join(st.Field(i).Name(), p)] = true
					}
				} else {
					out[""] = true
				}
			}
		}
		return out
	case *ast.UnaryExpr:
		return w.holds(info, x.X, held)
	case *ast.StarExpr:
		return w.holds(info, x.X, held)
	case *ast.BinaryExpr:
		if x.Op == token.ADD && (len(w.holds(info, x.X, held)) > 0 || len(w.holds(info, x.Y, held)) > 0) {
			return paths{"": true}
		}
	case *ast.IndexExpr:
		if len(w.holds(info, x.X, held)) > 0 {
			return paths{"": true}
		}
	case *ast.SliceExpr:
		if len(w.holds(info, x.X, held)) > 0 {
			return paths{"": true}
		}
	case *ast.CallExpr:
		return w.result(info, x, held, 0)
	}
	return nil
}

// result is which field paths of a call's i-th result hold the path.
func (w *walker) result(info *types.Info, call *ast.CallExpr, held facts, i int) paths {
	fun := ast.Unparen(call.Fun)
	given := false
	for _, a := range call.Args {
		if len(w.holds(info, a, held)) > 0 {
			given = true
		}
	}
	if id, ok := fun.(*ast.Ident); ok {
		if b, ok := info.Uses[id].(*types.Builtin); ok {
			if given && b.Name() == "append" {
				return paths{"": true}
			}
			return nil
		}
	}
	if tv, ok := info.Types[fun]; ok && tv.IsType() {
		if given {
			return paths{"": true} // a conversion
		}
		return nil
	}
	fn, recv := callee(info, call)
	if fn == nil {
		if given {
			return paths{"": true} // a function value handed the path may return it
		}
		return nil
	}
	if fn.Pkg() == nil {
		return nil
	}
	if recv != nil && len(w.holds(info, recv, held)) > 0 {
		given = true
	}
	if !given {
		return nil
	}
	switch fn.Pkg().Path() {
	case "strings", "path", "path/filepath":
		return paths{"": true}
	}
	tf := w.p.funcs[fn]
	if tf == nil {
		return nil // outside the module, not a string function: not the path
	}
	in, _ := w.bind(info, call, recv, held, fn, tf)
	sum := w.summarise(tf, in)
	if i < len(sum.results) {
		return sum.results[i]
	}
	return nil
}

// summarise is which fields of each of tf's results hold the path when
// its parameters hold what in says.
func (w *walker) summarise(tf *Func, in facts) *summary {
	key := fmt.Sprintf("%p", tf.Obj)
	for o, m := range in {
		for p := range m {
			key += fmt.Sprintf("|%p.%s", o, p)
		}
	}
	if s, ok := w.memo[key]; ok {
		return s
	}
	if w.busy == nil {
		w.busy = map[*types.Func]bool{}
	}
	sig := tf.Obj.Type().(*types.Signature)
	s := &summary{results: make([]paths, sig.Results().Len())}
	if w.busy[tf.Obj] {
		return s // recursion: assume it returns nothing of the path
	}
	w.busy[tf.Obj] = true
	defer delete(w.busy, tf.Obj)
	held := w.settle(tf, in)
	info := tf.Pkg.Info
	ast.Inspect(tf.Decl.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false // a closure's returns are not tf's
		}
		r, ok := n.(*ast.ReturnStmt)
		if !ok {
			return true
		}
		if len(r.Results) == 1 && len(s.results) > 1 {
			if call, ok := ast.Unparen(r.Results[0]).(*ast.CallExpr); ok {
				for i := range s.results {
					merge(&s.results[i], w.result(info, call, held, i))
				}
			}
			return true
		}
		for i, e := range r.Results {
			if i < len(s.results) {
				merge(&s.results[i], w.holds(info, e, held))
			}
		}
		return true
	})
	// Named results assigned the path.
	if sig.Results().Len() > 0 && tf.Decl.Type.Results != nil {
		i := 0
		for _, fld := range tf.Decl.Type.Results.List {
			for _, n := range fld.Names {
				for p := range held[info.Defs[n]] {
					merge(&s.results[i], paths{p: true})
				}
				i++
			}
			if len(fld.Names) == 0 {
				i++
			}
		}
	}
	w.memo[key] = s
	return s
}

func merge(dst *paths, src paths) {
	if len(src) == 0 {
		return
	}
	if *dst == nil {
		*dst = paths{}
	}
	for p := range src {
		(*dst)[p] = true
	}
}
