package fs

import (
	"fmt"
	"path/filepath"
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
