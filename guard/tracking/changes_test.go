package tracking

import (
	"sync"
	"testing"
)

func TestPathLocksSerialiseAndForget(t *testing.T) {
	var p Changes
	var wg sync.WaitGroup
	inside, most := 0, 0
	var mu sync.Mutex
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := p.Lock("MEMORY.md")
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			if !p.Locked("MEMORY.md") {
				t.Error("a held path is not busy")
			}
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Fatalf("%d commits of one path at once", most)
	}
	if p.Locked("MEMORY.md") || len(p.locks) != 0 {
		t.Fatalf("locks left behind: %v", p.locks)
	}
	// Other paths do not wait.
	u1 := p.Lock("a")
	u2 := p.Lock("b")
	u2()
	u1()
}
