package logindex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/evidence"
)

// keep writes the index at random points while the log grows, as the
// daemon does, merging segments on the way.
func keep(t *testing.T, tl *testLog, rounds int) *Keeper {
	t.Helper()
	k, err := OpenKeeper(tl.dir, tl.log)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rounds; i++ {
		tl.steps(1 + tl.rnd.IntN(30))
		if err := k.CatchUp(); err != nil {
			t.Fatal(err)
		}
		if tl.rnd.IntN(3) > 0 {
			if err := k.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return k
}

func open(t *testing.T, dir string) *Index {
	t.Helper()
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func whole(t *testing.T, dir string) *Index {
	t.Helper()
	x, err := OpenWhole(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// The index on disk, with the records past it, answers every question as
// a fold of the whole log does: segments written and merged at random
// points, a state file, a tail.
func TestOnDiskAnswersAsTheWholeLog(t *testing.T) {
	smallIndex(t)
	for seed := uint64(1); seed <= 4; seed++ {
		tl := newTestLog(t, t.TempDir(), seed)
		k := keep(t, tl, 25)
		tl.steps(17) // a tail the index does not hold yet
		x := open(t, tl.dir)
		if x.Rebuilt() != "" {
			t.Fatalf("seed %d: index set aside: %s", seed, x.Rebuilt())
		}
		if len(x.segs) < 2 {
			t.Fatalf("seed %d: %d segments: nothing was merged or split", seed, len(x.segs))
		}
		sameAnswers(t, "on disk vs whole log", collect(t, x, tl), collect(t, whole(t, tl.dir), tl))
		// The keeper's own index, caught up, answers the same.
		if err := k.CatchUp(); err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, "keeper vs whole log", collect(t, k.Index(), tl), collect(t, whole(t, tl.dir), tl))
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// An index held in memory (a bundle's records, given one by one) answers as
// the log's.
func TestInMemoryAnswersAsTheLog(t *testing.T) {
	tl := newTestLog(t, t.TempDir(), 9)
	tl.steps(300)
	m := New()
	_, err := evidence.ReadFrom(tl.dir, 0, func(idx int64, id string, r *evidence.Record) error {
		m.Add(idx, id, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A bundle's index has no blob store to size the versions by.
	sameAnswers(t, "memory vs log", noSizes(collect(t, m, tl)), noSizes(collect(t, whole(t, tl.dir), tl)))
}

func noSizes(a answers) answers {
	for p, vs := range a.History {
		for i := range vs {
			vs[i].Size = -1
		}
		a.History[p] = vs
	}
	for i := range a.Records {
		for j := range a.Records[i].Versions {
			a.Records[i].Versions[j].Size = -1
		}
	}
	return a
}

// What makes an index unusable, and how a reader finds out: each is set
// aside (Rebuilt says why) and the answers are the whole log's; the
// keeper then writes a good one again.
func TestDamagedIndexIsSetAsideAndRebuilt(t *testing.T) {
	smallIndex(t)
	other := newTestLog(t, t.TempDir(), 77)
	keep(t, other, 5).Close()
	cases := []struct {
		name   string
		damage func(t *testing.T, ix string)
		why    string
	}{
		{"missing", func(t *testing.T, ix string) { os.RemoveAll(ix) }, "there is no index"},
		{"segment byte", func(t *testing.T, ix string) { flip(t, glob1(t, ix, "seg-*"), 300) }, "does not match its hash"},
		{"block table", func(t *testing.T, ix string) { flipFromEnd(t, glob1(t, ix, "seg-*"), 40) }, "block table does not match the head"},
		{"state byte", func(t *testing.T, ix string) { flip(t, glob1(t, ix, "state-*"), 50) }, "state"},
		{"state gone", func(t *testing.T, ix string) { os.Remove(glob1(t, ix, "state-*")) }, "no such file"},
		{"head body", func(t *testing.T, ix string) {
			b, _ := os.ReadFile(filepath.Join(ix, "head"))
			os.WriteFile(filepath.Join(ix, "head"), []byte(strings.Replace(string(b), "\nstate ", "\nstate 1", 1)), 0o600)
		}, "head"},
		{"another log's index", func(t *testing.T, ix string) {
			os.RemoveAll(ix)
			copyDir(t, filepath.Join(other.dir, "evidence", "ix"), ix)
		}, "not computed from this log"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := newTestLog(t, t.TempDir(), 5)
			keep(t, tl, 12).Close()
			ix := filepath.Join(tl.dir, "evidence", "ix")
			want := collect(t, whole(t, tl.dir), tl)
			c.damage(t, ix)
			x := open(t, tl.dir)
			if !strings.Contains(x.Rebuilt(), c.why) {
				t.Fatalf("Rebuilt() = %q, want it to say %q", x.Rebuilt(), c.why)
			}
			sameAnswers(t, "set aside", collect(t, x, tl), want)
			// The log's writer rebuilds it on disk, and says so.
			k, err := OpenKeeper(tl.dir, tl.log)
			if err != nil {
				t.Fatal(err)
			}
			if k.Index().Rebuilt() == "" {
				t.Fatal("the keeper did not say it rebuilt the index")
			}
			sameAnswers(t, "rebuilt by the keeper", collect(t, k.Index(), tl), want)
			k.Close()
			y := open(t, tl.dir)
			if y.Rebuilt() != "" {
				t.Fatalf("the rebuilt index was set aside again: %s", y.Rebuilt())
			}
			sameAnswers(t, "rebuilt on disk", collect(t, y, tl), want)
		})
	}
}

// A head computed at more records than the log has (the log was replaced
// by an older copy) is not this log's.
func TestIndexAheadOfTheLogIsSetAside(t *testing.T) {
	smallIndex(t)
	tl := newTestLog(t, t.TempDir(), 6)
	keep(t, tl, 4).Close()
	small := t.TempDir()
	copyDir(t, filepath.Join(tl.dir, "evidence"), filepath.Join(small, "evidence"))
	tl.steps(20)
	k, err := OpenKeeper(tl.dir, tl.log)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
	// The bigger log's index over the smaller copy of the log.
	os.RemoveAll(filepath.Join(small, "evidence", "ix"))
	copyDir(t, filepath.Join(tl.dir, "evidence", "ix"), filepath.Join(small, "evidence", "ix"))
	x := open(t, small)
	if !strings.Contains(x.Rebuilt(), "covers") {
		t.Fatalf("an index ahead of the log was used: %q", x.Rebuilt())
	}
}

// Sessions: the registration binds the id, taint only grows, an end and a
// resume are folded, a cgroup names its first registration, whether the
// session is in the state file or in memory.
func TestSessions(t *testing.T) {
	tl := newTestLog(t, t.TempDir(), 1)
	start := func(id, principal, parent, cg string, taint ...string) {
		tl.add(&evidence.Record{Type: evidence.TypeSessionStart, Principal: principal, Taint: taint,
			Meta: evidence.Meta{Session: id, Verdict: "allow"}, Payload: &evidence.Payload{From: parent, To: cg, Detail: "sandbox: on; agent: codex"}})
	}
	start("a", "USER", "", "ca")
	start("b", "WEB", "a", "cb", "WEB_DERIVED")
	tl.add(&evidence.Record{Type: evidence.TypeTaint, Taint: []string{"SECRET_RISK"}, Meta: evidence.Meta{Session: "a"}})
	tl.add(&evidence.Record{Type: evidence.TypeSessionEnd, Meta: evidence.Meta{Session: "a"}})
	tl.log.Flush()
	k, err := OpenKeeper(tl.dir, tl.log)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	start("a", "TOOL_AUTH", "", "ca2", "TOOL_OUTPUT") // resumed
	tl.add(&evidence.Record{Type: evidence.TypeSessionEnd, Meta: evidence.Meta{Session: "b"}})
	tl.log.Flush()
	for _, x := range []*Index{open(t, tl.dir), whole(t, tl.dir)} {
		a, ok := x.Session("a")
		if !ok || a.Principal != "USER" || a.Ended != 0 || strings.Join(a.Taint, ",") != "SECRET_RISK,TOOL_OUTPUT" ||
			strings.Join(a.Cgroups, ",") != "ca,ca2" || a.Agent != "codex" {
			t.Fatalf("session a: %+v", a)
		}
		b, ok := x.Session("b")
		if !ok || b.Parent != "a" || b.Ended == 0 || b.Principal != "WEB" {
			t.Fatalf("session b: %+v", b)
		}
		if s, ok := x.SessionByCgroup("ca2"); !ok || s.ID != "a" {
			t.Fatalf("cgroup ca2: %+v", s)
		}
		if _, ok := x.Session("c"); ok {
			t.Fatal("an unknown session was found")
		}
	}
}

func glob1(t *testing.T, dir, pat string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, pat))
	if len(m) == 0 {
		t.Fatalf("no %s in %s", pat, dir)
	}
	return m[0]
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at%int64(len(b))] ^= 0x40
	os.WriteFile(path, b, 0o600)
}

func flipFromEnd(t *testing.T, path string, back int64) {
	t.Helper()
	fi, _ := os.Stat(path)
	flip(t, path, fi.Size()-back)
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	os.MkdirAll(to, 0o700)
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			copyDir(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(to, e.Name()), b, 0o600)
	}
}
