package evidence

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkAppend(b *testing.B) {
	l := openLog(b, newState(b))
	defer l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(sampleRecord(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendParallel(b *testing.B) {
	l := openLog(b, newState(b))
	defer l.Close()
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Append(sampleRecord(int(n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// fill appends n records in large group-commit batches.
func fill(b testing.TB, l *Log, n int) {
	errs := make(chan error, n)
	sem := make(chan struct{}, 2*maxBatch)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem }()
			r := sampleRecord(i)
			r.Meta.Reason = fmt.Sprint("fill ", i)
			_, err := l.Append(r)
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendScaling shows that one append costs the same at 10^3,
// 10^4 and 10^5 records (10^6 with AERFS_BENCH_1M=1): no rebuild, only
// O(log n) stored hashes read per record.
func BenchmarkAppendScaling(b *testing.B) {
	sizes := []int{1_000, 10_000, 100_000}
	if os.Getenv("AERFS_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, size := range sizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			dir := newState(b)
			l := openLog(b, dir)
			fill(b, l, size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := l.Append(sampleRecord(size + i)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			l.Close()
		})
	}
}

// TestAppendScalingFlat is the fast guard for the benchmark above: the
// mean append latency at 30k records is within a small factor of 1k.
func TestAppendScalingFlat(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing test")
	}
	defer func(f func(*os.File) error) { syncFile = f }(syncFile)
	syncFile = func(*os.File) error { return nil }
	measure := func(size int) time.Duration {
		l := openLog(t, newState(t))
		defer l.Close()
		fill(t, l, size)
		const k = 100
		start := time.Now()
		for i := 0; i < k; i++ {
			if _, err := l.Append(sampleRecord(size + i)); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / k
	}
	small, large := measure(1_000), measure(30_000)
	t.Logf("append at 1k: %v, at 30k: %v", small, large)
	if large > 4*small+2*time.Millisecond {
		t.Fatalf("append cost grows with log size: %v at 1k, %v at 30k", small, large)
	}
}

func BenchmarkVerify(b *testing.B) {
	dir := newState(b)
	l := openLog(b, dir)
	fill(b, l, 5_000)
	l.Close()
	out := filepath.Join(b.TempDir(), "b")
	if _, err := Export(dir, Filter{}, out); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(out, "records.jsonl"))
	b.Run("bundle", func(b *testing.B) {
		b.SetBytes(fi.Size())
		for i := 0; i < b.N; i++ {
			if _, err := VerifyBundle(out, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("state", func(b *testing.B) {
		b.SetBytes(fi.Size())
		for i := 0; i < b.N; i++ {
			if _, err := VerifyState(dir, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}
