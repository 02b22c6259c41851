package evidence

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProveAndConsistency(t *testing.T) {
	f := buildFixture(t)
	old, err := readCheckpointFile(f.state)
	if err != nil {
		t.Fatal(err)
	}
	l := openLog(t, f.state)
	for i := 0; i < 6; i++ {
		if _, err := l.Append(sampleRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	for idx := int64(0); idx < 13; idx++ {
		p, err := Prove(f.state, idx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(f.pub); err != nil {
			t.Fatalf("record %d: %v", idx, err)
		}
		j, _ := p.JSON()
		var back InclusionProof
		if json.Unmarshal(j, &back) != nil || back.Verify(f.pub) != nil {
			t.Fatal("JSON round trip")
		}
		if !strings.Contains(p.String(), p.ID) {
			t.Fatal("text form lacks the id")
		}
	}
	p, err := ProveID(f.state, f.ids[3])
	if err != nil || p.Index != 3 {
		t.Fatalf("ProveID: %+v %v", p, err)
	}
	p.ID = f.ids[4]
	checkKind(t, p.Verify(f.pub), KindIntegrity, "record 3: inclusion proof does not match")

	cur, _ := readCheckpointFile(f.state)
	cp, err := ProveConsistency(f.state, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConsistency(old, cur, f.pub, cp); err != nil {
		t.Fatal(err)
	}
	// A rewritten history: a different log of the same size, same key.
	forged := Checkpoint{Origin: "test.aerfs/log", Size: 7}
	forged.Root[0] = 1
	err = CheckConsistency(mustSign(t, f, forged), cur, f.pub, cp)
	checkKind(t, err, KindIntegrity, "consistency: tree 7 is not a prefix of tree 13")
}

func readCheckpointFile(state string) ([]byte, error) {
	rd, err := openReader(state)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return rd.cpRaw, nil
}

func mustSign(t *testing.T, f *fixture, c Checkpoint) []byte {
	l := openLog(t, f.state)
	defer l.Close()
	b, err := signCheckpoint(c, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFilterAndPartialExport(t *testing.T) {
	f := buildFixture(t)
	var n int
	flt := Filter{Path: "MEMORY.md"}
	ReadAll(f.state, func(_ int64, _ string, r *Record) error {
		if flt.Match(r) {
			n++
		}
		return nil
	})
	if n != 2 {
		t.Fatalf("path filter matched %d", n)
	}
	if (Filter{Since: time.Now().Add(time.Hour)}).Match(sampleRecordFixed()) {
		t.Fatal("since filter")
	}
	out := f.export(t, Filter{Type: TypeSessionEnd}, "end.zip")
	rep, err := VerifyBundle(out, f.pub)
	if err != nil {
		t.Fatal(err)
	}
	// session_end's parents (records 1 and 4) are proven by refs.
	if rep.Records != 1 || rep.Refs != 2 || rep.Complete {
		t.Fatalf("report %+v", rep)
	}
}

func TestFollow(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []int64
	done := make(chan error)
	go func() {
		done <- Follow(ctx, dir, 0, func(idx int64, _ string, _ *Record) error {
			mu.Lock()
			seen = append(seen, idx)
			mu.Unlock()
			return nil
		})
	}()
	for i := 0; i < 5; i++ {
		l.Append(sampleRecord(i))
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		mu.Lock()
		k := len(seen)
		mu.Unlock()
		if k == 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 5 {
		t.Fatalf("followed %v", seen)
	}
	for i, idx := range seen {
		if idx != int64(i) {
			t.Fatalf("followed %v", seen)
		}
	}
}
