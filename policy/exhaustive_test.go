package policy

import (
	"math/bits"
	"sync"
	"testing"
	"time"
)

// The bounded exhaustive check enumerates the whole finite input space of
// Decide that matters (every principal, every subject taint, every op,
// class, session relation, identification, label and source) and asserts
// the properties of DESIGN.md §4 on each verdict, stated independently of
// how Decide is written. Verdicts are kept in a bitset so that
// monotonicity can be checked across neighbouring inputs afterwards.

const (
	exNS     = 5 // NSNone, NSSessionsRoot, NSSession a, NSSession b, NSShared
	exSess   = 2 // subject in no session, in session a
	exIdent  = 2
	exSrc    = 5 // none, trusted clean, untrusted origin, tainted, trusted clean open for writing
	exLabels = 10
	exTaints = 1 << numTaintBits
)

type exTarget struct {
	ns      Namespace
	session string
}

var exTargets = [exNS]exTarget{{NSNone, ""}, {NSSessionsRoot, ""}, {NSSession, "a"}, {NSSession, "b"}, {NSShared, ""}}

var exSubjectSessions = [exSess]string{"", "a"}

// exIndex lays the space out with the subject taint innermost, so that a
// class's slice is a whole number of 64-bit words.
func exIndex(c Class, op Op, src, ident, sess, ns, label int, p Principal, taint Taint) int {
	i := int(c)
	i = i*int(numOps) + int(op)
	i = i*exSrc + src
	i = i*exIdent + ident
	i = i*exSess + sess
	i = i*exNS + ns
	i = i*exLabels + label
	i = i*int(numPrincipals) + int(p)
	return i*exTaints + int(taint)
}

const exSlots = int(numClasses) * int(numOps) * exSrc * exIdent * exSess * exNS * exLabels * int(numPrincipals) * exTaints

func exSources(op Op) int {
	if op == OpRenameTo || op == OpLink {
		return exSrc
	}
	return 1
}

func exSource(src int, t *Target) {
	switch src {
	case 1:
		t.HasSource, t.SourceOrigin, t.SourceTaint = true, User, 0
	case 2:
		t.HasSource, t.SourceOrigin, t.SourceTaint = true, Web, 0
	case 3:
		t.HasSource, t.SourceOrigin, t.SourceTaint = true, User, WebDerived
	case 4:
		t.HasSource, t.SourceOrigin, t.SourceWriting = true, User, true
	}
}

// exLabelSet is {0, a non-blocking flag, each blocking flag, all flags}.
func exLabelSet(t *testing.T, p *Policy) [exLabels]Taint {
	var ls [exLabels]Taint
	blocking := p.Blocking()
	nonBlocking := AllTaint &^ blocking
	if nonBlocking == 0 || bits.OnesCount16(uint16(blocking)) != exLabels-3 {
		t.Fatalf("the exhaustive check expects the default blocking set, got %v", blocking)
	}
	ls[1] = nonBlocking & -nonBlocking
	i := 2
	for b := Taint(1); b <= AllTaint; b <<= 1 {
		if blocking&b != 0 {
			ls[i] = b
			i++
		}
	}
	ls[exLabels-1] = AllTaint
	return ls
}

func TestExhaustiveProperties(t *testing.T) {
	start := time.Now()
	p := Default()
	blocking := p.Blocking()
	labels := exLabelSet(t, p)
	allowed := make([]uint64, exSlots/64)
	visited := make([]uint64, exSlots/64)
	var (
		mu    sync.Mutex
		total int
	)

	t.Run("verdicts", func(t *testing.T) {
		for c := Plain; c < numClasses; c++ {
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel()
				n := exClass(t, p, c, blocking, labels, allowed, visited)
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}

	t.Run("monotonic", func(t *testing.T) {
		for c := Plain; c < numClasses; c++ {
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel()
				exMonotonic(t, c, allowed, visited)
			})
		}
	})

	// 8 principals × 256 taints × (10 ops + 2 ops × 5 sources) × 5 classes
	// × 2 subject sessions × 5 targets × 2 identified × 10 labels.
	const want = 8 * 256 * (10 + 2*5) * 5 * 2 * 5 * 2 * 10
	if total != want {
		t.Errorf("checked %d combinations, want %d", total, want)
	}
	t.Logf("checked %d combinations in %v", total, time.Since(start).Round(time.Millisecond))
}

func get(b []uint64, i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func set(b []uint64, i int)      { b[i>>6] |= 1 << (i & 63) }

// exClass checks every combination of class c and returns how many.
func exClass(t *testing.T, p *Policy, c Class, blocking Taint, labels [exLabels]Taint, allowed, visited []uint64) int {
	n := 0
	fails := 0
	fail := func(s Subject, op Op, tg Target, v Verdict, what string) {
		fails++
		if fails <= 20 {
			t.Errorf("%s: subject %+v op %v target %+v: %v", what, s, op, tg, v)
		}
	}
	for op := Op(0); op < numOps; op++ {
		mut := op.Mutates()
		for src := 0; src < exSources(op); src++ {
			for ident := 0; ident < exIdent; ident++ {
				for sess := 0; sess < exSess; sess++ {
					for ns := 0; ns < exNS; ns++ {
						for li, label := range labels {
							for pr := Principal(0); pr < numPrincipals; pr++ {
								trusted := pr == User || pr == Sys
								for taint := Taint(0); taint <= AllTaint; taint++ {
									s := Subject{Principal: pr, Taint: taint, Session: exSubjectSessions[sess], Identified: ident == 1}
									tg := Target{Class: c, Namespace: exTargets[ns].ns, Session: exTargets[ns].session, LabelTaint: label}
									exSource(src, &tg)
									v := p.Decide(s, op, tg)
									n++
									idx := exIndex(c, op, src, ident, sess, ns, li, pr, taint)
									set(visited, idx)
									if v.Allow {
										set(allowed, idx)
									}
									clean := taint&blocking == 0
									owner := trusted && s.Session == ""
									srcOK := !tg.HasSource || (tg.SourceOrigin.Trusted() && tg.SourceTaint&blocking == 0 && !tg.SourceWriting)

									if v.Rule == RuleUnset || v.Rule >= numRules || v.Rule.ID() == "" || v.Rule.Reason() == "" {
										fail(s, op, tg, v, "verdict without a rule")
									}
									if v.Allow != allowRule(v.Rule) && v.Rule != RuleSecret && v.Rule != RulePromotion {
										fail(s, op, tg, v, "rule does not fit the verdict")
									}
									if !v.Allow && v.AddTaint != 0 {
										fail(s, op, tg, v, "a denial adds taint")
									}
									if v.AddTaint&^(label|SecretRisk) != 0 {
										fail(s, op, tg, v, "taint from nowhere")
									}
									if tg.SourceWriting && (c.Guarded() || tg.Namespace == NSShared) && v.Allow {
										fail(s, op, tg, v, "a file open for writing took a guarded name")
									}
									if tg.SourceWriting && (c.Guarded() || tg.Namespace == NSShared) && !v.Allow && tg.Namespace == NSNone && s.Identified && v.Rule != RuleOpenWriter {
										fail(s, op, tg, v, "a file open for writing refused by another rule than RW-open-writer")
									}
									if c == Identity && mut && v.Allow {
										fail(s, op, tg, v, "identity mutated")
									}
									if (c == Memory || c == Control) && mut && v.Allow &&
										!(trusted && clean && s.Identified && srcOK) {
										fail(s, op, tg, v, "memory/control mutated without trust")
									}
									if tg.Namespace == NSSession && v.Allow {
										if s.Session != "" && s.Session != tg.Session {
											fail(s, op, tg, v, "cross-session access")
										}
										if s.Session == "" && !trusted {
											fail(s, op, tg, v, "untrusted outsider in a session")
										}
										if !s.Identified {
											fail(s, op, tg, v, "unidentified in a session")
										}
									}
									if tg.Namespace == NSSessionsRoot && mut && v.Allow && !(owner && s.Identified) {
										fail(s, op, tg, v, "sessions directory changed by a non-owner")
									}
									if !s.Identified && mut && (c.Guarded() || tg.Namespace == NSShared) && v.Allow {
										fail(s, op, tg, v, "unidentified mutation of a guarded path")
									}
									if c == Secret && v.Allow {
										if !s.Identified {
											fail(s, op, tg, v, "unidentified caller reached a secret")
										}
										if !trusted && op != OpLookup {
											fail(s, op, tg, v, "untrusted principal opened a secret")
										}
										if trusted && (op == OpRead || op == OpWrite || op == OpExec) && v.AddTaint&SecretRisk == 0 {
											fail(s, op, tg, v, "secret use without SECRET_RISK")
										}
										// A secret file is loaded as
										// configuration (.env): no tainted
										// writer changes it, nor does content
										// of untrusted origin arrive under it.
										if mut && !(clean && srcOK) {
											fail(s, op, tg, v, "secret changed by a tainted writer or from an untrusted source")
										}
									}
									if (op == OpRead || op == OpExec) && v.Allow && v.AddTaint&label != label {
										fail(s, op, tg, v, "read without the label's taint")
									}
									if tg.Namespace == NSShared && mut && v.Allow &&
										!(owner && clean && s.Identified && srcOK) {
										fail(s, op, tg, v, "shared namespace entered without promotion")
									}
									if op == OpPromote && v.Allow &&
										!(tg.Namespace == NSSession && owner && clean && label&blocking == 0 && s.Identified) {
										fail(s, op, tg, v, "promotion without an untainted owner and item")
									}
									// Liveness: the properties above hold for
									// deny-all too; these say what must pass.
									if tg.Namespace == NSNone && op != OpPromote {
										wantAllow := true
										switch {
										case c == Identity && mut:
											wantAllow = false
										case (c == Memory || c == Control) && mut:
											wantAllow = trusted && clean && s.Identified && srcOK
										case c == Secret:
											wantAllow = s.Identified && (trusted || op == OpLookup) && (!mut || clean && srcOK)
										case !s.Identified && (op == OpRead || op == OpExec) && label&blocking != 0:
											// Its taint would reach no subject.
											wantAllow = false
										}
										if v.Allow != wantAllow {
											fail(s, op, tg, v, "wrong verdict outside the namespaces")
										}
									}
									if tg.Namespace == NSSession && tg.Session == "a" && s.Session == "a" &&
										c == Plain && s.Identified && op != OpPromote && !v.Allow {
										fail(s, op, tg, v, "a session cannot use its own files")
									}
									if op == OpPromote && tg.Namespace == NSSession && owner && clean &&
										label&blocking == 0 && s.Identified && c != Identity && !v.Allow {
										fail(s, op, tg, v, "the owner cannot promote a clean item")
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return n
}

// allowRule reports whether r is a rule that allows; R5 and R8 do both.
func allowRule(r Rule) bool {
	switch r {
	case RulePlain, RulePropagate, RuleAllowed:
		return true
	}
	return false
}

// exMonotonic checks that more taint, a lower principal or losing
// identification never turns a denial into an allowance, over class c.
func exMonotonic(t *testing.T, c Class, allowed, visited []uint64) {
	fails := 0
	for op := Op(0); op < numOps; op++ {
		for src := 0; src < exSources(op); src++ {
			for sess := 0; sess < exSess; sess++ {
				for ns := 0; ns < exNS; ns++ {
					for li := 0; li < exLabels; li++ {
						for pr := Principal(0); pr < numPrincipals; pr++ {
							for taint := Taint(0); taint <= AllTaint; taint++ {
								for ident := 0; ident < exIdent; ident++ {
									i := exIndex(c, op, src, ident, sess, ns, li, pr, taint)
									if !get(visited, i) {
										t.Fatalf("slot not visited: %v %v", c, op)
									}
									if get(allowed, i) {
										continue
									}
									// Denied here: denied with any more taint,
									for b := Taint(1); b <= AllTaint; b <<= 1 {
										if taint&b == 0 && get(allowed, exIndex(c, op, src, ident, sess, ns, li, pr, taint|b)) {
											fails++
											if fails < 20 {
												t.Errorf("%v %v: adding %v to %v turns a denial into an allowance (principal %v)", c, op, b, taint, pr)
											}
										}
									}
									// at any principal at or below this level,
									for lo := Principal(0); lo < numPrincipals; lo++ {
										if lo.Level() <= pr.Level() && get(allowed, exIndex(c, op, src, ident, sess, ns, li, lo, taint)) {
											fails++
											if fails < 20 {
												t.Errorf("%v %v: lowering %v to %v turns a denial into an allowance (taint %v)", c, op, pr, lo, taint)
											}
										}
									}
									// and unidentified.
									if ident == 1 && get(allowed, exIndex(c, op, src, 0, sess, ns, li, pr, taint)) {
										fails++
										if fails < 20 {
											t.Errorf("%v %v: losing identification turns a denial into an allowance", c, op)
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
}
