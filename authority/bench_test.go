package authority

import "testing"

// BenchmarkCheck is the hot decision: the act gate for a file whose class
// is known (from its label), no elevation lookup. It must stay under 1 µs
// and allocate nothing.
func BenchmarkCheck(b *testing.B) {
	stamps := [3]Stamp{
		{Class: None, Rule: RuleWriteSource, Sources: []Source{{Path: "notes/page.md", Class: None}}},
		{Class: Inform, Rule: RuleWriteAgent},
		{Class: Act, Rule: RuleWriteOwner},
	}
	cfg := Config{}
	b.ReportAllocs()
	b.ResetTimer()
	var n int
	for i := 0; i < b.N; i++ {
		d := Check(&stamps[i%3], Action(i%int(NumActions)), &cfg, Place(i%int(numPlaces)))
		if d.Outcome == Allow {
			n++
		}
	}
	if b.N > 3 && n == 0 {
		b.Fatal("nothing allowed")
	}
}

// BenchmarkAuthorize is the whole gate for none content with a few
// attestations on record (the slow path: elevation lookup under the lock).
func BenchmarkAuthorize(b *testing.B) {
	m := New(Config{Attestors: map[string]string{"erp": "finance", "bank": "bank"}}, nil)
	st := m.Write(webW, "skills/pay.sh", hashOf("pay"))
	m.Attest(attestor("erp"), st.Hash)
	r := Request{Path: "skills/pay.sh", Stamp: &st, Action: Exec, Now: t0}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if m.Authorize(r).Allowed() {
			b.Fatal("allowed")
		}
	}
}

// TestCheckBudget holds the hot decision to its budget: ≤ 1 µs, 0 allocations.
func TestCheckBudget(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing is not meaningful under -short or -race")
	}
	r := testing.Benchmark(BenchmarkCheck)
	t.Logf("Check: %d ns/op, %d allocs/op", r.NsPerOp(), r.AllocsPerOp())
	if r.NsPerOp() > 1000 || r.AllocsPerOp() != 0 {
		t.Fatalf("Check costs %d ns/op and %d allocs/op; budget 1000 ns, 0 allocs", r.NsPerOp(), r.AllocsPerOp())
	}
}
