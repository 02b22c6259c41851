package policy

import (
	"strings"
	"testing"

	"github.com/aerfs/aerfs/configs"
)

// TestExhaustiveFirstIdentity checks every subject, operation, source and
// namespace against an identity path that holds no file yet, with
// identity_first_create on and off: a mutation is allowed exactly when the
// policy allows first creation, the operation creates the name (create,
// write, rename or link onto it), the subject is identified, trusted and
// untainted, the content's source is trusted, untainted and not open for
// writing, and the name is outside the shared namespace — and then by R1-first; an identity path
// that holds a file is never changed (TestExhaustiveProperties).
func TestExhaustiveFirstIdentity(t *testing.T) {
	on := Default()
	off, err := Parse("off.yaml", []byte(strings.Replace(string(configs.DefaultPolicy),
		"identity_first_create: true", "identity_first_create: false", 1)))
	if err != nil {
		t.Fatal(err)
	}
	blocking := on.Blocking()
	n := 0
	for _, p := range []*Policy{on, off} {
		for op := Op(0); op < numOps; op++ {
			for src := 0; src < exSources(op); src++ {
				for ident := 0; ident < 2; ident++ {
					for sess := 0; sess < exSess; sess++ {
						for ns := 0; ns < exNS; ns++ {
							for pr := Principal(0); pr < numPrincipals; pr++ {
								for taint := Taint(0); taint <= AllTaint; taint++ {
									s := Subject{Principal: pr, Taint: taint, Session: exSubjectSessions[sess], Identified: ident == 1}
									tg := Target{Class: Identity, Namespace: exTargets[ns].ns, Session: exTargets[ns].session, Absent: true}
									exSource(src, &tg)
									v := p.Decide(s, op, tg)
									n++
									if !op.Mutates() {
										continue
									}
									trusted := pr == User || pr == Sys
									srcOK := !tg.HasSource || (tg.SourceOrigin.Trusted() && tg.SourceTaint&blocking == 0 && !tg.SourceWriting)
									creates := op == OpCreate || op == OpWrite || op == OpRenameTo || op == OpLink && tg.HasSource
									want := p == on && creates && s.Identified && trusted && taint&blocking == 0 && srcOK &&
										tg.Namespace != NSShared
									// The namespaces decide first: a session's
									// files and the sessions root stay its own.
									if nsv := p.Decide(s, OpLookup, tg); !nsv.Allow {
										want = false
									}
									if tg.Namespace == NSSessionsRoot && !(trusted && s.Session == "" && s.Identified) {
										want = false
									}
									if v.Allow != want {
										t.Fatalf("policy first-create=%v: subject %+v op %v target %+v: got %v, want allow=%v", p == on, s, op, tg, v, want)
									}
									if v.Allow && v.Rule != RuleFirstIdentity {
										t.Fatalf("first creation allowed by %s, want R1-first", v.Rule.ID())
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("checked %d combinations", n)
}
