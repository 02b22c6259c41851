package label

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/aerfs/aerfs/policy"
)

func TestLabelJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "labels.jsonl")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	s.Set(Key{1, 2}, &Label{Origin: policy.Web, Taint: policy.WebDerived})
	s.Close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"k":{"dev":1,"ino":3},"l":{"orig`) // a crash mid-line
	f.Close()
	s, err = Open(p)
	if err != nil {
		t.Fatalf("torn tail refused: %v", err)
	}
	defer s.Close()
	if s.Get(Key{1, 2}) == nil {
		t.Fatal("complete label lost")
	}
	// Corruption in the middle is not a torn tail: refuse.
	os.WriteFile(p, []byte("garbage\n{\"k\":{\"dev\":1,\"ino\":2}}\n"), 0o600)
	if _, err := Open(p); err == nil {
		t.Fatal("corrupt label journal accepted")
	}
}

// BenchmarkLabelLookup measures a label lookup by inode with 10 to 100,000
// labelled files: it must stay flat.
func BenchmarkLabelLookup(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "labels.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.mu.Lock()
			for i := 0; i < n; i++ {
				s.m[Key{1, uint64(i)}] = &Label{Origin: policy.Web, Taint: policy.WebDerived}
			}
			s.mu.Unlock()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if s.Get(Key{1, uint64(i % n)}) == nil {
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
		s := &Store{m: map[Key]*Label{}}
		for j := 0; j < 100000; j++ {
			s.m[Key{1, uint64(j)}] = &Label{Origin: policy.Web, Taint: policy.WebDerived, Session: "s1",
				Record: "3fa85f6457174562b3fc2c963f66afa63fa85f6457174562b3fc2c963f66afa6"}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/100000, "B/label")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/100k")
		runtime.KeepAlive(s)
	}
}

// A label the journal could not take (a full disk) is written with the
// next change once there is room, so the next mount still has it.
func TestLabelJournalCatchesUpAfterFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("tmpfs: %v (needs root)", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	p := filepath.Join(dir, "labels.jsonl")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(dir, "fill")
	f, _ := os.Create(fill)
	for {
		if _, err := f.Write(make([]byte, 512)); err != nil {
			break
		}
	}
	f.Close()
	web := &Label{Origin: policy.Web, Taint: policy.WebDerived}
	if err := s.Set(Key{1, 2}, web); err == nil {
		t.Fatal("a label written to a full disk reported stored")
	}
	os.Remove(fill)
	if err := s.Set(Key{1, 3}, web); err != nil {
		t.Fatalf("the next label once space is back: %v", err)
	}
	s.Close()
	s, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []Key{{1, 2}, {1, 3}} {
		if s.Get(k) == nil {
			t.Errorf("label of %v lost", k)
		}
	}
}
