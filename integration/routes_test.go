package integration

import (
	"fmt"
	"path"
	"strings"
	"syscall"
	"testing"
)

// Every mutation route against every guarded class: refused from WEB (and
// from USER for identity) with content, metadata and xattrs untouched and a
// deny record in the log; allowed from a clean USER session for memory and
// control, with the file exactly as the route leaves it on a plain
// filesystem.

const origContent = "orig line one\norig line two\n"

type routeTarget struct {
	name     string // subtest and session name part
	path     string // the guarded file, present with origContent
	fresh    string // an absent name of the same class
	identity bool
}

// control reports whether the target is of the control class.
func (tg routeTarget) control() bool { return tg.name == "skill" || tg.name == "claude" }

// byRule keeps the entries with rule.
func byRule(les []LogEntry, rule string) []LogEntry {
	var out []LogEntry
	for _, le := range les {
		if le.Record.Meta.Rule == rule {
			out = append(out, le)
		}
	}
	return out
}

var routeTargets = []routeTarget{
	{"identity", "SOUL.md", "IDENTITY.md", true},
	{"memory", "MEMORY.md", "AGENTS.md", false},
	{"memdir", "memory/x.md", "memory/y.md", false},
	{"skill", "skills/x/SKILL.md", "skills/x/NEW.md", false},
	{"claude", ".claude/settings.json", ".claude/new.json", false},
}

// routeCtx names the files of one route run. T is the target, F the fresh
// guarded name, S a source file, H a link name, A a name to move to, D the
// target's directory and D2 where a directory move goes.
type routeCtx struct {
	t             *testing.T
	e             *Env
	T, F, S, H, A string
	D, Top, D2    string
}

func (c *routeCtx) expand(s string) string {
	return strings.NewReplacer("{T}", c.T, "{F}", c.F, "{S}", c.S, "{H}", c.H, "{A}", c.A,
		"{D}", c.D, "{TOP}", c.Top, "{D2}", c.D2).Replace(s)
}

func (c *routeCtx) content(rel, want string) {
	c.t.Helper()
	got, ok := c.e.TryRead(rel)
	if !ok {
		c.t.Fatalf("%s: cannot be read after the route (want %q)", rel, want)
	}
	if got != want {
		c.t.Fatalf("%s = %q, want %q", rel, got, want)
	}
}

func (c *routeCtx) absent(rel string) {
	c.t.Helper()
	if c.e.Exists(rel) {
		c.t.Fatalf("%s still exists", rel)
	}
}

func (c *routeCtx) statIs(format, rel, want string) {
	c.t.Helper()
	if got := c.e.Stat(format, rel); got != want {
		c.t.Fatalf("stat -c %s %s = %q, want %q", format, rel, got, want)
	}
}

type route struct {
	name   string
	script string
	dir    bool // needs the target to live in a directory
	top    bool // acts on the target's top-level directory (skip when it is D)
	// special puts a symlink to a plain file or a FIFO at the name:
	// refused to every session at a guarded name (RX-control-symlink at
	// a control name, RX-guarded-symlink at another), the owner's only.
	special bool
	// user checks what a clean USER session's run left behind.
	user func(c *routeCtx)
	// caps: the route needs a capability (chown) that a confined
	// session of root does not keep; it runs unconfined, so that the
	// request reaches aerfs, which must decide it itself.
	caps bool
}

// shRoute runs a route's script in a session: confined, or unconfined for
// a route that needs a capability.
func (e *Env) shRoute(rt route, principal, session, script string) Result {
	if rt.caps {
		args := []string{"run", "--workspace", e.WS, "--principal", principal, "--session", session, "--sandbox=off", "--", "sh", "-c", script}
		return runT(e.WS, toolEnv(e.t), aerfsBin, args...)
	}
	return e.ShT(principal, session, script)
}

var routes = []route{
	{name: "overwrite", script: `printf 'evil\n' > {T}`, user: func(c *routeCtx) { c.content(c.T, "evil\n") }},
	{name: "append", script: `printf 'evil\n' >> {T}`, user: func(c *routeCtx) { c.content(c.T, origContent+"evil\n") }},
	{name: "truncate-cmd", script: `truncate -s 0 {T}`, user: func(c *routeCtx) { c.content(c.T, "") }},
	{name: "os-truncate", script: `$PY $OPS truncate {T} 4`, user: func(c *routeCtx) { c.content(c.T, origContent[:4]) }},
	{name: "ftruncate", script: `$PY $OPS ftruncate {T} 5`, user: func(c *routeCtx) { c.content(c.T, origContent[:5]) }},
	{name: "fallocate", script: `$PY $OPS fallocate {T} 8`, user: func(c *routeCtx) { c.content(c.T, origContent+strings.Repeat("\x00", 8)) }},
	{name: "copy-file-range", script: `printf 'CFR!' > {S} && $PY $OPS cfr {S} {T} 4`, user: func(c *routeCtx) { c.content(c.T, "CFR!"+origContent[4:]) }},
	{name: "mv-onto", script: `printf 'moved\n' > {S} && mv -f {S} {T}`, user: func(c *routeCtx) { c.content(c.T, "moved\n"); c.absent(c.S) }},
	{name: "mv-away", script: `mv {T} {A}`, user: func(c *routeCtx) { c.absent(c.T); c.content(c.A, origContent) }},
	{name: "rename-exchange", script: `printf 'xch\n' > {S} && $PY $OPS rename2 {S} {T} exchange`, user: func(c *routeCtx) { c.content(c.T, "xch\n"); c.content(c.S, origContent) }},
	{name: "rename-noreplace", script: `printf 'nr\n' > {S} && $PY $OPS rename2 {S} {F} noreplace`, user: func(c *routeCtx) { c.content(c.F, "nr\n"); c.absent(c.S) }},
	{name: "rm", script: `rm -f {T}`, user: func(c *routeCtx) { c.absent(c.T) }},
	{name: "link-to-write", script: `ln {T} {H} && printf 'vialink\n' >> {H}`, user: func(c *routeCtx) { c.content(c.T, origContent+"vialink\n"); c.statIs("%h", c.T, "2") }},
	{name: "link-from", script: `printf 'linked\n' > {S} && ln -f {S} {T}`, user: func(c *routeCtx) { c.content(c.T, "linked\n") }},
	{name: "link-fresh", script: `printf 'linked\n' > {S} && ln {S} {F}`, user: func(c *routeCtx) { c.content(c.F, "linked\n") }},
	{name: "symlink-over", special: true, script: `ln -sf {S} {T}`, user: func(c *routeCtx) { c.statIs("%F|%N", c.T, "symbolic link|'"+c.T+"' -> '"+c.S+"'") }},
	{name: "symlink-fresh", special: true, script: `ln -s {S} {F}`, user: func(c *routeCtx) { c.statIs("%F|%N", c.F, "symbolic link|'"+c.F+"' -> '"+c.S+"'") }},
	{name: "mkfifo", special: true, script: `mkfifo {F}`, user: func(c *routeCtx) { c.statIs("%F", c.F, "fifo") }},
	{name: "mknod", special: true, script: `mknod {F} p`, user: func(c *routeCtx) { c.statIs("%F", c.F, "fifo") }},
	{name: "chmod", script: `chmod 600 {T}`, user: func(c *routeCtx) { c.statIs("%a", c.T, "600"); c.content(c.T, origContent) }},
	{name: "chown", script: `chown 4321:4321 {T}`, caps: true, user: func(c *routeCtx) { c.statIs("%u:%g", c.T, "4321:4321"); c.content(c.T, origContent) }},
	{name: "touch-d", script: `touch -d @978307200 {T}`, user: func(c *routeCtx) { c.statIs("%Y", c.T, "978307200"); c.content(c.T, origContent) }},
	{name: "setxattr", script: `$PY $OPS setxattr {T} user.aerfs v1`, user: func(c *routeCtx) {
		r := c.e.OwnerT(c.expand(`$PY $OPS getxattr {T} user.aerfs`))
		if r.Code != 0 || r.Stdout != "v1" {
			c.t.Fatalf("user.aerfs after setxattr: %s", r)
		}
	}},
	{name: "removexattr", script: `$PY $OPS removexattr {T} user.keep`, user: func(c *routeCtx) {
		if r := c.e.OwnerT(c.expand(`$PY $OPS getxattr {T} user.keep`)); r.Code == 0 {
			c.t.Fatalf("user.keep still there after removexattr: %s", r)
		}
	}},
	{name: "mmap-shared", script: `$PY $OPS mmap {T} MMAP`, user: nil}, // checked in runUserRoute
	{name: "dd-notrunc", script: `printf DDDD | dd of={T} conv=notrunc status=none`, user: func(c *routeCtx) { c.content(c.T, "DDDD"+origContent[4:]) }},
	{name: "cp-over", script: `printf 'copied\n' > {S} && cp {S} {T}`, user: func(c *routeCtx) { c.content(c.T, "copied\n") }},
	{name: "sed-i", script: `sed -i s/one/ONE/ {T}`, user: func(c *routeCtx) { c.content(c.T, strings.Replace(origContent, "one", "ONE", 1)) }},
	{name: "tee-a", script: `printf 'teed\n' | tee -a {T} >/dev/null`, user: func(c *routeCtx) { c.content(c.T, origContent+"teed\n") }},
	{name: "create-fresh", script: `printf 'fresh\n' > {F}`, user: func(c *routeCtx) { c.content(c.F, "fresh\n") }},
	{name: "mv-dir", dir: true, script: `mv {D} {D2}`, user: func(c *routeCtx) { c.absent(c.T); c.content(path.Join(c.D2, path.Base(c.T)), origContent) }},
	{name: "rm-rf-dir", dir: true, script: `rm -rf {D}`, user: func(c *routeCtx) { c.absent(c.T) }},
	{name: "mv-topdir", dir: true, top: true, script: `mv {TOP} {D2}`, user: func(c *routeCtx) { c.absent(c.T); c.absent(c.Top) }},
	{name: "rm-rf-topdir", dir: true, top: true, script: `rm -rf {TOP}`, user: func(c *routeCtx) { c.absent(c.T); c.absent(c.Top) }},
}

func (rt route) applies(tg routeTarget) bool {
	d := path.Dir(tg.path)
	if rt.dir && d == "." {
		return false
	}
	if rt.top && !strings.Contains(d, "/") {
		return false
	}
	return true
}

func newRouteCtx(t *testing.T, e *Env, tg routeTarget, tag string) *routeCtx {
	d := path.Dir(tg.path)
	top := strings.Split(tg.path, "/")[0]
	return &routeCtx{t: t, e: e, T: tg.path, F: tg.fresh,
		S: "src-" + tag, H: "hl-" + tag, A: "away-" + tag,
		D: d, Top: top, D2: "moved-" + tag}
}

// state is what no refused route may change about a target: type, mode,
// owner, mtime, size, link count and content hash, whether the fresh name
// exists, and (for the xattr routes) the xattr names.
func (e *Env) state(c *routeCtx, xattrs bool) string {
	script := `stat -c '%F|%a|%u:%g|%Y|%s|%h' -- "$1"; sha256sum < "$1"; if test -e "$2" || test -L "$2"; then echo "$2 exists"; fi`
	if xattrs {
		script += `; $PY -c 'import os,sys; print(sorted(os.listxattr(sys.argv[1])))' "$1"`
	}
	r := runT(e.WS, toolEnv(e.t), "sh", "-c", script, "sh", c.T, c.F)
	return r.Stdout + r.Stderr
}

func routeFiles() map[string]string {
	files := map[string]string{}
	for _, tg := range routeTargets {
		files[tg.path] = origContent
	}
	return files
}

// newRouteEnv mounts a workspace with the route targets, each with a
// user.keep xattr set on the backing file before the mount.
func newRouteEnv(t *testing.T) *Env {
	e := newEnv(t, routeFiles())
	for _, tg := range routeTargets {
		if err := syscall.Setxattr(e.WS+"/"+tg.path, "user.keep", []byte("k"), 0); err != nil {
			t.Fatalf("setxattr on the backing file: %v", err)
		}
	}
	return e.Mount()
}

// firstCreation names the routes that create an absent name with regular
// content: the first creation of an identity file (identity_first_create).
// A symlink, FIFO or device at an identity name never is one.
var firstCreation = map[string]bool{"create-fresh": true, "link-fresh": true, "rename-noreplace": true}

func TestRoutesRefused(t *testing.T) {
	e := newRouteEnv(t)
	type run struct {
		tg      routeTarget
		rt      route
		session string
		c       *routeCtx
	}
	var runs []run
	for _, tg := range routeTargets {
		principals := []string{"WEB"}
		if tg.identity {
			principals = append(principals, "USER")
		}
		for _, p := range principals {
			for _, rt := range routes {
				if !rt.applies(tg) {
					continue
				}
				if tg.identity && p == "USER" && firstCreation[rt.name] {
					// A clean USER session may create an absent identity
					// file once (identity_first_create, R1-first):
					// TestIdentityFirstCreation covers it.
					continue
				}
				tg, rt, p := tg, rt, p
				tag := strings.ToLower(p) + "-" + tg.name + "-" + rt.name
				t.Run(p+"/"+tg.name+"/"+rt.name, func(t *testing.T) {
					c := newRouteCtx(t, e, tg, tag)
					xa := strings.Contains(rt.name, "xattr")
					before := e.state(c, xa)
					r := e.shRoute(rt, p, tag, c.expand(rt.script))
					if after := e.state(c, xa); after != before {
						got, _ := e.TryRead(tg.path)
						bugf(t, "%s by %s on %s changed it (content now %q)\nbefore %s\nafter  %s\n%s", rt.name, p, tg.path, got, before, after, r)
					}
					if r.Code == 0 && rt.name != "mmap-shared" {
						bugf(t, "%s by %s on %s: the command succeeded though nothing changed\n%s", rt.name, p, tg.path, r)
					}
					runs = append(runs, run{tg, rt, tag, c})
				})
			}
		}
	}
	li := e.index()
	for _, x := range runs {
		x := x
		t.Run("log/"+x.session, func(t *testing.T) {
			paths := append([]string{x.c.T, x.c.F, x.c.S, x.c.H, x.c.A, x.c.D2}, ancestors(x.c.T)...)
			d := li.denials(x.session, paths...)
			if x.c.D != "." {
				// Editors and ln -sf stage a temporary name in the target's
				// directory: refusing that create is refusing the route.
				for _, le := range li.denials(x.session) {
					if path.Dir(le.Record.Meta.Path) == x.c.D {
						d = append(d, le)
					}
				}
			}
			if len(d) == 0 {
				bugf(t, "no deny record for %s in session %s; its records:%s", x.tg.path, x.session, describe(li.bySession[x.session]))
			}
			switch {
			case x.tg.identity && firstCreation[x.rt.name]:
				// An absent identity name: the first creation is refused
				// for the creator's own reason (a WEB session is below USER).
				if !hasRule(d, "R3-principal") && !hasRule(d, "R1-immutable") {
					bugf(t, "denials of %s are %v, want R3-principal", x.c.F, rules(d))
				}
			case x.tg.identity && !hasRule(d, "R1-immutable"):
				bugf(t, "denials of %s are %v, want R1-immutable", x.tg.path, rules(d))
			}
		})
	}
}

func TestRoutesAllowedForUser(t *testing.T) {
	e := newRouteEnv(t)
	var sessions []string
	hung := ""
	for _, tg := range routeTargets {
		if tg.identity {
			continue
		}
		for _, rt := range routes {
			if !rt.applies(tg) {
				continue
			}
			tg, rt := tg, rt
			tag := "user-" + tg.name + "-" + rt.name
			sessions = append(sessions, tag)
			t.Run(tg.name+"/"+rt.name, func(t *testing.T) {
				if hung != "" {
					t.Skipf("the daemon hung earlier (%s)", hung)
				}
				c := newRouteCtx(t, e, tg, tag)
				// Reset from the owner's terminal: the target back to its
				// original content with user.keep, the fresh name gone.
				reset := c.expand(`set -e; rm -rf -- {T} {F}; mkdir -p -- {D}; printf '` + strings.ReplaceAll(origContent, "\n", `\n`) + `' > {T}`)
				if rt.name == "removexattr" {
					reset += c.expand(`; $PY $OPS setxattr {T} user.keep k`)
				}
				if r := e.OwnerT(reset); r.Code != 0 {
					checkHung(t, e, &hung, "reset before "+tag, r)
					t.Fatalf("reset: %s", r)
				}
				r := e.shRoute(rt, "USER", tag, c.expand(rt.script))
				checkHung(t, e, &hung, tag, r)
				if rt.name == "mmap-shared" {
					// A shared writable mapping of a guarded file may be refused
					// (direct_io) or committed; never half-applied.
					got, _ := e.TryRead(tg.path)
					if r.Code != 0 && got != origContent {
						bugf(t, "mmap failed but %s changed to %q\n%s", tg.path, got, r)
					}
					if r.Code == 0 && got != "MMAP"+origContent[4:] {
						bugf(t, "mmap succeeded but %s = %q\n%s", tg.path, got, r)
					}
					return
				}
				// In memory/, the symlink routes' relative source names
				// memory/src-…, a memory name: a link of one class to the
				// same class, allowed.
				sameClass := tg.name == "memdir" && strings.HasPrefix(rt.name, "symlink")
				if rt.special && !sameClass {
					// A session's symlink (to a plain source) or FIFO at a
					// guarded name is refused for its own rule, even a clean
					// USER's: at a control name any, at another guarded name
					// one that makes it serve what is not guarded the same
					// way.
					rule := "RX-guarded-symlink"
					if tg.control() {
						rule = "RX-control-symlink"
					}
					if r.Code == 0 {
						bugf(t, "%s by a clean USER session at the guarded name %s went through: %s", rt.name, tg.path, r)
					}
					if d := e.index().denials(tag); !hasRule(d, rule) {
						bugf(t, "%s at %s: no %s refusal:%s", rt.name, tg.path, rule, describe(d))
					}
					return
				}
				if r.Code != 0 {
					bugf(t, "%s by a clean USER session on %s refused: %s", rt.name, tg.path, r)
				}
				rt.user(c)
			})
		}
	}
	if hung != "" {
		return
	}
	li := e.index()
	var bad []string
	for _, s := range sessions {
		if d := li.denials(s); len(d) > 0 && !strings.HasSuffix(s, "-mmap-shared") && !(len(d) == len(byRule(d, "RX-control-symlink"))+len(byRule(d, "RX-guarded-symlink"))) {
			bad = append(bad, fmt.Sprintf("%s:%s", s, describe(d)))
		}
	}
	if len(bad) > 0 {
		bugf(t, "clean USER sessions were denied:\n%s", strings.Join(bad, "\n"))
	}
}

// checkHung fails the test when r timed out: the daemon is stuck, so the
// mount is detached and the remaining subtests are skipped.
func checkHung(t *testing.T, e *Env, hung *string, what string, r Result) {
	t.Helper()
	if r.Code != -2 {
		return
	}
	*hung = what
	abortFuse(t, e.WS)
	syscall.Unmount(e.WS, syscall.MNT_DETACH)
	bugf(t, "the daemon hung during %s (see TestFifoOnReusedInodeDoesNotHang): %s", what, r)
}
