package policy

import (
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestPrincipalNames(t *testing.T) {
	want := []string{"SYS", "USER", "TOOL_AUTH", "TOOL_UNAUTH", "WEB", "SKILL", "CHANNEL", "EXTERNAL"}
	levels := []int{5, 4, 3, 2, 1, 1, 0, 0}
	for i, p := range Principals() {
		if p.String() != want[i] || p.Level() != levels[i] {
			t.Errorf("%d: %v level %d, want %s level %d", i, p, p.Level(), want[i], levels[i])
		}
		for _, s := range []string{want[i], strings.ToLower(want[i]), strings.ToUpper(want[i][:1]) + strings.ToLower(want[i][1:])} {
			got, err := ParsePrincipal(s)
			if err != nil || got != p {
				t.Errorf("ParsePrincipal(%q) = %v, %v", s, got, err)
			}
		}
		if p.Trusted() != (p == Sys || p == User) {
			t.Errorf("%v.Trusted() = %v", p, p.Trusted())
		}
	}
	for _, s := range []string{"", "ADMIN", "ROOT", " USER", "TOOL-AUTH"} {
		if _, err := ParsePrincipal(s); err == nil || !strings.Contains(err.Error(), principalHint) {
			t.Errorf("ParsePrincipal(%q) = %v", s, err)
		}
	}
	if Principal(99).Valid() || Principal(99).String() != "Principal(99)" || Principal(99).Trusted() {
		t.Error("invalid principal")
	}
}

func TestLower(t *testing.T) {
	for _, a := range Principals() {
		for _, b := range Principals() {
			got := Lower(a, b)
			if got.Level() > a.Level() || got.Level() > b.Level() {
				t.Errorf("Lower(%v, %v) = %v raises trust", a, b, got)
			}
			if got != a && got != b {
				t.Errorf("Lower(%v, %v) = %v", a, b, got)
			}
			if a.Level() == b.Level() && got != b {
				t.Errorf("Lower(%v, %v) = %v, equal levels keep the new principal", a, b, got)
			}
		}
	}
	if Lower(Sys, Web) != Web || Lower(Web, Sys) != Web || Lower(Web, Skill) != Skill {
		t.Error("Lower")
	}
	if Lower(99, Sys) != External || Lower(Sys, 99) != External {
		t.Error("Lower of an invalid principal must fail closed")
	}
}

func TestTaintNames(t *testing.T) {
	want := []string{"UNTRUSTED", "INJECTION_SUSPECT", "PROXY_DERIVED", "SECRET_RISK", "CROSS_SESSION", "TOOL_OUTPUT", "SKILL_OUTPUT", "WEB_DERIVED"}
	if got := AllTaint.Names(); !slices.Equal(got, want) {
		t.Errorf("AllTaint.Names() = %q", got)
	}
	for i, name := range want {
		for _, s := range []string{name, strings.ToLower(name)} {
			got, err := ParseTaint(s)
			if err != nil || got != 1<<i {
				t.Errorf("ParseTaint(%q) = %v, %v", s, got, err)
			}
		}
	}
	for _, s := range []string{"", "none", "WEB", "UNTRUSTED|WEB_DERIVED"} {
		if _, err := ParseTaint(s); err == nil {
			t.Errorf("ParseTaint(%q) accepted", s)
		}
	}
	if Taint(0).String() != "none" || len(Taint(0).Names()) != 0 {
		t.Error("empty taint")
	}
	if got := (WebDerived | Untrusted).String(); got != "UNTRUSTED|WEB_DERIVED" {
		t.Errorf("String() = %q", got)
	}
	if got := (Untrusted | 1<<12).String(); got != "UNTRUSTED|0x1000" {
		t.Errorf("unknown bits: %q", got)
	}
}

func TestOriginTaint(t *testing.T) {
	want := map[Principal]Taint{
		Sys: 0, User: 0, ToolAuth: ToolOutput, ToolUnauth: ToolOutput | Untrusted,
		Web: WebDerived | Untrusted, Skill: SkillOutput | Untrusted, Channel: Untrusted, External: Untrusted,
		99: Untrusted,
	}
	for p, w := range want {
		if got := OriginTaint(p); got != w {
			t.Errorf("OriginTaint(%v) = %v, want %v", p, got, w)
		}
	}
	// Under the default policy every untrusted origin blocks.
	for _, p := range Principals() {
		if !p.Trusted() && OriginTaint(p)&Default().Blocking() == 0 {
			t.Errorf("origin %v leaves no blocking taint", p)
		}
	}
}

func TestStrings(t *testing.T) {
	for c := Class(0); c <= numClasses; c++ {
		if c.String() == "" {
			t.Errorf("class %d", c)
		}
	}
	for o := Op(0); o <= numOps; o++ {
		if o.String() == "" {
			t.Errorf("op %d", o)
		}
	}
	for n := Namespace(0); n <= NSSessionsRoot+1; n++ {
		if n.String() == "" {
			t.Errorf("namespace %d", n)
		}
	}
}

// TestPurity keeps the decision core pure: the package imports no file
// system layer, no OS or process access outside load.go (DESIGN.md §10).
func TestPurity(t *testing.T) {
	allowed := map[string]bool{
		"bytes": true, "errors": true, "fmt": true, "io": true, "path": true, "strconv": true,
		"strings": true, "sync": true, "time": true, "slices": true, "sort": true, "math/bits": true,
		"go.yaml.in/yaml/v3": true, "github.com/aerfs/aerfs/configs": true,
		"net/netip": true, // address values only: parsing and comparing, no sockets
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := goparser.ParseFile(fset, f, src, goparser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if allowed[path] || f == "load.go" && (path == "os" || path == "syscall") {
				continue
			}
			t.Errorf("%s imports %q: the policy package is pure", f, path)
		}
	}
}
