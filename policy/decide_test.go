package policy

import (
	"strings"
	"testing"
)

func subj(p Principal, taint Taint, session string) Subject {
	return Subject{Principal: p, Taint: taint, Session: session, Identified: true}
}

// target classifies rel with the default policy, as the FUSE layer does.
func target(t testing.TB, rel string) Target {
	c, ns, id := Default().Classify(rel)
	return Target{Class: c, Namespace: ns, Session: id}
}

func TestDecideNamedCases(t *testing.T) {
	p := Default()
	withLabel := func(tg Target, l Taint) Target { tg.LabelTaint = l; return tg }
	withSource := func(tg Target, origin Principal, taint Taint) Target {
		tg.HasSource, tg.SourceOrigin, tg.SourceTaint = true, origin, taint
		return tg
	}
	tests := []struct {
		name    string
		s       Subject
		op      Op
		t       Target
		allow   bool
		rule    string
		addTain Taint
	}{
		// DESIGN.md §4 rule 1.
		{"A1 SOUL.md overwrite by WEB", subj(Web, WebDerived|Untrusted, "a"), OpWrite, target(t, "SOUL.md"), false, "R1-immutable", 0},
		{"SOUL.md overwrite by SYS", subj(Sys, 0, ""), OpWrite, target(t, "SOUL.md"), false, "R1-immutable", 0},
		{"IDENTITY.md unlink by USER", subj(User, 0, ""), OpUnlink, target(t, "IDENTITY.md"), false, "R1-immutable", 0},
		{"rename away from SOUL.md", subj(User, 0, ""), OpRenameFrom, target(t, "SOUL.md"), false, "R1-immutable", 0},
		{"chmod SOUL.md", subj(User, 0, ""), OpSetattr, target(t, "SOUL.md"), false, "R1-immutable", 0},
		{"setxattr on SOUL.md", subj(User, 0, ""), OpXattr, target(t, "SOUL.md"), false, "R1-immutable", 0},
		{"link onto SOUL.md", subj(User, 0, ""), OpLink, target(t, "SOUL.md"), false, "R1-immutable", 0},
		{"read SOUL.md", subj(Web, 0, ""), OpRead, target(t, "SOUL.md"), true, "R0-plain", 0},
		// Rule 3.
		{"WEB write to MEMORY.md", subj(Web, 0, ""), OpWrite, target(t, "MEMORY.md"), false, "R3-principal", 0},
		{"TOOL_AUTH create in skills", subj(ToolAuth, 0, ""), OpCreate, target(t, "skills/evil/SKILL.md"), false, "R3-principal", 0},
		{"SKILL edits .claude settings", subj(Skill, 0, "a"), OpWrite, target(t, "sessions/a/.claude/settings.json"), false, "R3-principal", 0},
		// Rule 2.
		{"USER with WEB_DERIVED taint writes MEMORY.md", subj(User, WebDerived, ""), OpWrite, target(t, "MEMORY.md"), false, "R2-taint", 0},
		{"USER with TOOL_OUTPUT truncates AGENTS.md", subj(User, ToolOutput, ""), OpSetattr, target(t, "AGENTS.md"), false, "R2-taint", 0},
		{"USER with SECRET_RISK writes MEMORY.md", subj(User, SecretRisk, ""), OpWrite, target(t, "MEMORY.md"), true, "RA-allowed", 0},
		{"clean USER writes MEMORY.md", subj(User, 0, ""), OpWrite, target(t, "MEMORY.md"), true, "RA-allowed", 0},
		{"clean USER writes memory/2024.md", subj(User, 0, ""), OpCreate, target(t, "memory/2024.md"), true, "RA-allowed", 0},
		// Rule 7 (content part).
		{"rename TOOL_UNAUTH file onto MEMORY.md by clean USER", subj(User, 0, ""), OpRenameTo,
			withSource(target(t, "MEMORY.md"), ToolUnauth, OriginTaint(ToolUnauth)), false, "R7-authority", 0},
		{"rename clean USER file onto MEMORY.md (sed -i)", subj(User, 0, ""), OpRenameTo,
			withSource(target(t, "MEMORY.md"), User, 0), true, "RA-allowed", 0},
		{"link of a web-tainted file onto CLAUDE.md", subj(Sys, 0, ""), OpLink,
			withSource(target(t, "docs/CLAUDE.md"), User, WebDerived), false, "R7-authority", 0},
		// Rule 4.
		{"session a lists sessions/b", subj(User, 0, "a"), OpLookup, target(t, "sessions/b"), false, "R4-namespace", 0},
		{"session a reads sessions/b/notes", subj(Sys, 0, "a"), OpRead, target(t, "sessions/b/notes"), false, "R4-namespace", 0},
		{"session a reads its own notes", subj(ToolAuth, 0, "a"), OpRead, target(t, "sessions/a/notes"), true, "R0-plain", 0},
		{"session a lists the sessions directory", subj(Web, 0, "a"), OpLookup, target(t, "sessions"), true, "R0-plain", 0},
		{"session a renames the sessions directory", subj(User, 0, "a"), OpRenameFrom, target(t, "sessions"), false, "R4-namespace", 0},
		{"owner renames the sessions directory", subj(User, 0, ""), OpRenameFrom, target(t, "sessions"), true, "R0-plain", 0},
		{"owner reads into a session", subj(User, 0, ""), OpRead, target(t, "sessions/b/notes"), true, "R0-plain", 0},
		{"untrusted outsider reads into a session", subj(ToolAuth, 0, ""), OpLookup, target(t, "sessions/b/notes"), false, "R4-namespace", 0},
		{"session a creates sessions/c", subj(User, 0, "a"), OpCreate, target(t, "sessions/c"), false, "R4-namespace", 0},
		// Rule 8.
		{"WEB reads .env", subj(Web, 0, ""), OpRead, target(t, ".env"), false, "R8-secret", 0},
		{"TOOL_AUTH reads deploy/id_rsa", subj(ToolAuth, 0, ""), OpRead, target(t, "deploy/id_rsa"), false, "R8-secret", 0},
		{"WEB looks up .env", subj(Web, 0, ""), OpLookup, target(t, ".env"), true, "R8-secret", 0},
		{"USER reads .env", subj(User, 0, ""), OpRead, target(t, ".env"), true, "R8-secret", SecretRisk},
		{"USER reads a labelled key", subj(User, 0, ""), OpRead, withLabel(target(t, "tls/server.key"), WebDerived), true, "R8-secret", SecretRisk | WebDerived},
		{"USER writes .netrc", subj(User, 0, ""), OpWrite, target(t, ".netrc"), true, "R8-secret", SecretRisk},
		// Rule 9.
		{"pid-0 write of MEMORY.md", Subject{Principal: User}, OpWrite, target(t, "MEMORY.md"), false, "R9-unidentified", 0},
		{"pid-0 read of .env", Subject{Principal: Sys}, OpRead, target(t, ".env"), false, "R9-unidentified", 0},
		{"pid-0 lookup in a session", Subject{Principal: Sys}, OpLookup, target(t, "sessions/a/x"), false, "R9-unidentified", 0},
		{"pid-0 write in shared", Subject{Principal: Sys}, OpWrite, target(t, "shared/x"), false, "R9-unidentified", 0},
		{"pid-0 write of a plain file", Subject{Principal: External}, OpWrite, target(t, "build/out.o"), true, "R0-plain", 0},
		{"pid-0 read of a labelled MEMORY.md", Subject{Principal: External}, OpRead, withLabel(target(t, "MEMORY.md"), Untrusted), false, "R9-unidentified", 0},
		{"pid-0 read of MEMORY.md", Subject{Principal: External}, OpRead, target(t, "MEMORY.md"), true, "R0-plain", 0},
		{"invalid principal", Subject{Principal: 99, Identified: true}, OpWrite, target(t, "MEMORY.md"), false, "R9-unidentified", 0},
		{"invalid op", subj(User, 0, ""), numOps, target(t, "README"), false, "R9-unidentified", 0},
		{"invalid class", subj(User, 0, ""), OpRead, Target{Class: numClasses}, false, "R9-unidentified", 0},
		{"invalid namespace", subj(User, 0, ""), OpRead, Target{Namespace: 42}, false, "R9-unidentified", 0},
		{"session target without an id", subj(User, 0, ""), OpRead, Target{Namespace: NSSession}, false, "R4-namespace", 0},
		// Rule 5.
		{"owner promotes a clean item", subj(User, 0, ""), OpPromote, target(t, "sessions/a/report.md"), true, "R5-promotion", 0},
		{"owner promotes clean MEMORY.md", subj(User, 0, ""), OpPromote, target(t, "sessions/a/MEMORY.md"), true, "R5-promotion", 0},
		{"owner promotes a web-tainted item", subj(User, 0, ""), OpPromote, withLabel(target(t, "sessions/a/report.md"), WebDerived), false, "R5-promotion", 0},
		{"owner promotes with a non-blocking label", subj(User, 0, ""), OpPromote, withLabel(target(t, "sessions/a/report.md"), SecretRisk), true, "R5-promotion", 0},
		{"tainted owner promotes", subj(User, Untrusted, ""), OpPromote, target(t, "sessions/a/report.md"), false, "R5-promotion", 0},
		{"session member promotes its own item", subj(User, 0, "a"), OpPromote, target(t, "sessions/a/report.md"), false, "R5-promotion", 0},
		{"untrusted outsider promotes", subj(ToolAuth, 0, ""), OpPromote, target(t, "sessions/a/report.md"), false, "R4-namespace", 0},
		{"promote from outside a session", subj(User, 0, ""), OpPromote, target(t, "report.md"), false, "R5-promotion", 0},
		{"promote from shared", subj(User, 0, ""), OpPromote, target(t, "shared/report.md"), false, "R5-promotion", 0},
		{"promote SOUL.md", subj(User, 0, ""), OpPromote, target(t, "sessions/a/SOUL.md"), false, "R1-immutable", 0},
		{"promote pid 0", Subject{Principal: User}, OpPromote, target(t, "sessions/a/report.md"), false, "R9-unidentified", 0},
		{"session writes into shared", subj(User, 0, "a"), OpWrite, target(t, "shared/report.md"), false, "R5-promotion", 0},
		{"session reads shared", subj(Web, 0, "a"), OpRead, target(t, "shared/report.md"), true, "R0-plain", 0},
		{"owner writes shared", subj(User, 0, ""), OpWrite, target(t, "shared/report.md"), true, "RA-allowed", 0},
		{"tainted owner writes shared", subj(User, WebDerived, ""), OpCreate, target(t, "shared/x"), false, "R5-promotion", 0},
		{"owner moves a tainted file into shared", subj(User, 0, ""), OpRenameTo,
			withSource(target(t, "shared/x"), User, Untrusted), false, "R7-authority", 0},
		// Rule 6.
		{"read a web-derived file", subj(ToolAuth, 0, "a"), OpRead, withLabel(target(t, "sessions/a/page.html"), WebDerived|Untrusted), true, "R6-propagate", WebDerived | Untrusted},
		{"exec a skill output", subj(User, 0, ""), OpExec, withLabel(target(t, "bin/tool"), SkillOutput), true, "R6-propagate", SkillOutput},
		{"write does not propagate", subj(User, 0, ""), OpWrite, withLabel(target(t, "notes.txt"), WebDerived), true, "R0-plain", 0},
		{"read MEMORY.md with a label", subj(User, 0, ""), OpRead, withLabel(target(t, "MEMORY.md"), ToolOutput), true, "R6-propagate", ToolOutput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := p.Decide(tc.s, tc.op, tc.t)
			if v.Allow != tc.allow || v.Rule.ID() != tc.rule || v.AddTaint != tc.addTain {
				t.Errorf("Decide(%+v, %v, %+v) = %v, want allow=%v %s +%v", tc.s, tc.op, tc.t, v, tc.allow, tc.rule, tc.addTain)
			}
		})
	}
}

func TestCanGrant(t *testing.T) {
	for _, g := range Principals() {
		for _, p := range Principals() {
			v := CanGrant(subj(g, 0, ""), p)
			want := p.Level() <= g.Level()
			if v.Allow != want || v.Rule != RuleGrant {
				t.Errorf("CanGrant(%v, %v) = %v, want allow=%v RG-grant", g, p, v, want)
			}
			if v := CanGrant(Subject{Principal: g}, p); v.Allow || v.Rule != RuleUnidentified {
				t.Errorf("unidentified CanGrant(%v, %v) = %v, want deny R9", g, p, v)
			}
		}
	}
	if v := CanGrant(subj(Sys, 0, ""), numPrincipals); v.Allow {
		t.Errorf("granting an invalid principal: %v", v)
	}
	if v := CanGrant(subj(User, 0, ""), Sys); v.Allow || v.Rule.ID() != "RG-grant" {
		t.Errorf("USER granting SYS: %v", v)
	}
}

func TestRules(t *testing.T) {
	seen := map[string]bool{}
	for r := Rule(0); r < numRules; r++ {
		id, reason := r.ID(), r.Reason()
		if id == "" || reason == "" || seen[id] {
			t.Errorf("rule %d: id %q reason %q", r, id, reason)
		}
		seen[id] = true
		if reason != strings.ToLower(reason[:1])+reason[1:] || strings.HasSuffix(reason, ".") {
			t.Errorf("rule %s: reason %q should be lowercase without a period", id, reason)
		}
	}
	for _, id := range []string{"R0-plain", "R1-immutable", "R2-taint", "R3-principal", "R4-namespace", "R5-promotion",
		"R6-propagate", "R7-authority", "R8-secret", "R9-unidentified", "RG-grant", "RA-allowed", "RS-session"} {
		if !seen[id] {
			t.Errorf("missing rule id %s", id)
		}
	}
	for _, r := range []Rule{numRules, 200} {
		if r.ID() != "R-invalid" || r.Reason() != "invalid rule" {
			t.Errorf("invalid rule %d: %q, %q", r, r.ID(), r.Reason())
		}
	}
	var zero Verdict
	if !zero.Deny() || zero.Rule != RuleUnset {
		t.Error("the zero Verdict must deny and say nothing decided")
	}
	if got := (Verdict{Allow: true, Rule: RuleSecret, AddTaint: SecretRisk}).String(); got != "allow R8-secret +SECRET_RISK" {
		t.Errorf("Verdict.String() = %q", got)
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	p := Default()
	s := subj(User, 0, "a")
	tg := target(t, "sessions/a/MEMORY.md")
	tg.LabelTaint = WebDerived
	n := testing.AllocsPerRun(1000, func() {
		p.Decide(s, OpWrite, tg)
		p.Decide(s, OpRead, tg)
		p.Decide(Subject{}, OpLookup, tg)
	})
	if n != 0 {
		t.Errorf("Decide allocates %v times per run", n)
	}
}

func BenchmarkDecide(b *testing.B) {
	p := Default()
	cases := []struct {
		s  Subject
		op Op
		t  Target
	}{
		{subj(User, 0, ""), OpWrite, target(b, "MEMORY.md")},
		{subj(Web, WebDerived, "a"), OpRead, Target{Namespace: NSSession, Session: "a", LabelTaint: Untrusted}},
		{subj(ToolAuth, 0, "a"), OpWrite, target(b, "sessions/b/x")},
		{subj(User, 0, ""), OpRenameTo, Target{Class: Control, HasSource: true, SourceOrigin: User}},
	}
	b.ReportAllocs()
	var sink Verdict
	for i := 0; b.Loop(); i++ {
		c := &cases[i&3]
		sink = p.Decide(c.s, c.op, c.t)
	}
	_ = sink
}
