package principal

import (
	"os"
	"testing"

	"github.com/aerfs/aerfs/policy"
)

// BenchmarkResolveCached is the common case: a thread that made a request
// before. Cost: one read of /proc/<tid>/stat and one readlink.
func BenchmarkResolveCached(b *testing.B) {
	pol := policy.Default()
	r := NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	pid := os.Getpid()
	r.Resolve(pid)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !r.Resolve(pid).Identified {
			b.Fatal("unidentified")
		}
	}
}

// BenchmarkResolveUncached resolves a process seen for the first time:
// /proc status, stat and exe, and the walk up its ancestry.
func BenchmarkResolveUncached(b *testing.B) {
	pol := policy.Default()
	pid := os.Getpid()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
		if !r.Resolve(pid).Identified {
			b.Fatal("unidentified")
		}
	}
}

// BenchmarkSubject builds the policy's view of a resolved caller (done at
// every decision, since taint may have grown).
func BenchmarkSubject(b *testing.B) {
	pol := policy.Default()
	r := NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	res := r.Resolve(os.Getpid())
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = res.Subject()
	}
}
