package fs

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aerfs/aerfs/policy"
)

// BenchmarkLabelLookup measures a label lookup by inode with 10 to 100,000
// labelled files: it must stay flat.
func BenchmarkLabelLookup(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := OpenLabels(filepath.Join(b.TempDir(), "labels.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.mu.Lock()
			for i := 0; i < n; i++ {
				s.m[fileKey{1, uint64(i)}] = &Label{Origin: policy.Web, Taint: policy.WebDerived}
			}
			s.mu.Unlock()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if s.Get(fileKey{1, uint64(i % n)}) == nil {
					b.Fatal("missing")
				}
			}
		})
	}
}

// BenchmarkLabelStoreMemory reports the memory 100,000 labels take in the
// daemon (bytes per label), the figure the scale target asks for.
func BenchmarkLabelStoreMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := &LabelStore{m: map[fileKey]*Label{}}
		for j := 0; j < 100000; j++ {
			s.m[fileKey{1, uint64(j)}] = &Label{Origin: policy.Web, Taint: policy.WebDerived, Session: "s1",
				Record: "3fa85f6457174562b3fc2c963f66afa63fa85f6457174562b3fc2c963f66afa6"}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/100000, "B/label")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/100k")
		runtime.KeepAlive(s)
	}
}
