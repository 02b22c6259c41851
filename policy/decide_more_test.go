package policy

import "testing"

// Every subject, operation and target class for the decisions around
// Decide: a held session mutates nothing and is otherwise decided by
// Decide; a reviewed session's guarded commits go to the owner and nothing
// else changes; owner-only requests pass only the owner's channel; drift
// is labelled untrusted and restored only when the policy says so.
func TestDecideAroundExhaustive(t *testing.T) {
	for _, onDrift := range []string{"record", "restore"} {
		p, err := Parse("test", []byte("version: 1\nreview_sessions: [r]\non_drift: "+onDrift+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for op := Op(0); op < numOps; op++ {
			for c := Plain; c < numClasses; c++ {
				for _, tg := range exTargets {
					for _, sess := range []string{"", "a", "r"} {
						for pr := Principal(0); pr < numPrincipals; pr++ {
							for taint := Taint(0); taint <= AllTaint; taint++ {
								for _, ident := range []bool{false, true} {
									s := Subject{Principal: pr, Taint: taint, Session: sess, Identified: ident}
									target := Target{Class: c, Namespace: tg.ns, Session: tg.session}
									base := p.Decide(s, op, target)
									for _, held := range []bool{false, true} {
										n++
										v := p.DecideHeld(s, held, op, target)
										if held && op.Mutates() {
											if v.Allow || v.Rule != RuleBurst {
												t.Fatalf("held session %+v %v %+v: %v, want deny RB-burst", s, op, target, v)
											}
										} else if v != base {
											t.Fatalf("DecideHeld(%+v, %v, %v, %+v) = %v, Decide says %v", s, held, op, target, v, base)
										}
										if op != OpWrite {
											continue
										}
										cv := p.DecideCommit(s, held, target)
										switch {
										case v.Allow && c.Guarded() && sess == "r":
											if cv.Allow || cv.Rule != RuleReview {
												t.Fatalf("reviewed session's guarded commit %+v %+v: %v, want deny RR-review", s, target, cv)
											}
										case cv != v:
											t.Fatalf("DecideCommit(%+v, %v, %+v) = %v, want %v", s, held, target, cv, v)
										}
									}
								}
							}
						}
					}
				}
			}
		}
		t.Logf("on_drift %s: %d combinations", onDrift, n)
		v, label, restore := p.DecideDrift()
		if v.Rule != RuleDrift || label != Untrusted || restore != (onDrift == "restore") {
			t.Fatalf("DecideDrift with on_drift %s: %v %v %v", onDrift, v, label, restore)
		}
	}
	for pr := Principal(0); pr < numPrincipals; pr++ {
		for _, sess := range []string{"", "a"} {
			for _, ident := range []bool{false, true} {
				for taint := Taint(0); taint <= AllTaint; taint++ {
					s := Subject{Principal: pr, Taint: taint, Session: sess, Identified: ident}
					v := DecideOwner(s)
					want := ident && pr.Valid() && pr.Trusted() && sess == "" && taint == 0
					if v.Allow != want {
						t.Fatalf("DecideOwner(%+v) = %v, want allow=%v", s, v, want)
					}
					if ident && pr.Valid() && pr.Trusted() && sess == "" && taint != 0 && v.Rule != RuleOwnerTaint {
						t.Fatalf("DecideOwner(%+v) refused with %v, want RO-tainted", s, v.Rule)
					}
					if !v.Allow && v.Rule != RuleOwner && v.Rule != RuleUnidentified && v.Rule != RuleOwnerTaint {
						t.Fatalf("DecideOwner(%+v) refused with %v", s, v.Rule)
					}
				}
			}
		}
	}
}
