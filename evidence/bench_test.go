package evidence

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
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
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < b.N; i++ {
			if _, err := VerifyState(dir, ""); err != nil {
				b.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		// Memory is per record (ids, offsets), never per content byte.
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/5000, "alloc-B/record")
	})
	// The floor: SHA-256 over the same bytes, as sha256sum would do.
	b.Run("sha256", func(b *testing.B) {
		data, err := os.ReadFile(filepath.Join(out, "records.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			sha256.Sum256(data)
		}
	})
}
