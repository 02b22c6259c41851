package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// readsPendingMax is tracking's: more reads than this before a change are
// listed in the background.
const readsPendingMax = 4096

func readsRecords(t *testing.T, h *house) []*evidence.Record {
	var out []*evidence.Record
	for _, r := range records(t, h) {
		if r.Type == evidence.TypeReads {
			out = append(out, r)
		}
	}
	return out
}

func shaHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (h *house) testRead(t *testing.T, res *principal.Resolved, rel string) {
	t.Helper()
	st, err := h.dir.Lstat(rel)
	if err != nil {
		t.Fatal(err)
	}
	h.readOpened(NoCaller, res, rel, st, nil, syscall.O_RDONLY)
}

// Every file a reader opens for reading is listed once, with the hash of
// the version read, in a reads record that its next change names; the
// next reads record names the previous one.
func TestReadsListedAtTheNextChange(t *testing.T) {
	h, ws, _ := testHouse(t, map[string]string{"notes/src.md": "poison\n", "notes/b.md": "b\n", "MEMORY.md": "m\n"})
	me := h.reg.Resolve(os.Getpid())
	if p := h.reads.Parents(me, ""); len(p) != 0 {
		t.Fatalf("parents before any read: %v", p)
	}
	h.testRead(t, me, "notes/src.md")
	h.testRead(t, me, "notes/src.md") // the same version again: listed once
	// Write-only opens are not reads.
	st, _ := h.dir.Lstat("notes/b.md")
	h.readOpened(NoCaller, me, "notes/b.md", st, nil, syscall.O_WRONLY)
	p1 := h.reads.Parents(me, "")
	rs := readsRecords(t, h)
	if len(rs) != 1 || len(p1) != 1 {
		t.Fatalf("reads records %d, parents %v", len(rs), p1)
	}
	r := rs[0].Payload.Reads
	if len(r) != 1 || r[0].Path != "notes/src.md" || r[0].Hash != shaHex("poison\n") || r[0].Fp != "" || len(rs[0].Parents) != 0 {
		t.Fatalf("reads record %+v", rs[0])
	}
	// Nothing new read: the same parent, no new record.
	if p := h.reads.Parents(me, ""); len(p) != 1 || p[0] != p1[0] || len(readsRecords(t, h)) != 1 {
		t.Fatalf("second change: parents %v", p)
	}
	// A file changed between the read and the change: listed by its
	// fingerprint only (the content read is gone). The new record names
	// the previous one.
	h.testRead(t, me, "notes/b.md")
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(filepath.Join(ws, "notes/b.md"), []byte("changed\n"), 0o644)
	p2 := h.reads.Parents(me, "")
	rs = readsRecords(t, h)
	if len(rs) != 2 || len(p2) != 1 || p2[0] == p1[0] || rs[1].Parents[0] != p1[0] {
		t.Fatalf("reads records %d, parents %v", len(rs), p2)
	}
	if r := rs[1].Payload.Reads; len(r) != 1 || r[0].Path != "notes/b.md" || r[0].Hash != "" || r[0].Fp == "" {
		t.Fatalf("changed file listed as %+v", r)
	}
	// The changed version, read again, is a new version: listed again.
	h.testRead(t, me, "notes/b.md")
	h.reads.Parents(me, "")
	rs = readsRecords(t, h)
	if r := rs[len(rs)-1].Payload.Reads; len(rs) != 3 || r[0].Hash != shaHex("changed\n") {
		t.Fatalf("new version of b: %+v", rs[len(rs)-1])
	}
	// An unidentified caller's reads are not kept.
	h.testRead(t, &principal.Resolved{Reason: "test"}, "notes/src.md")
	if p := h.reads.Parents(&principal.Resolved{}, ""); len(p) != 0 {
		t.Fatalf("unidentified reader tracked: %v", p)
	}
}

// A reader that reads more than readsPendingMax files before changing
// anything has them listed in the background, in records under the size
// limit, chained.
func TestReadsSpillAndChain(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < readsPendingMax+10; i++ {
		files[fmt.Sprintf("d/f%05d", i)] = "x"
	}
	h, _, _ := testHouse(t, files)
	me := h.reg.Resolve(os.Getpid())
	for i := 0; i < readsPendingMax+10; i++ {
		h.testRead(t, me, fmt.Sprintf("d/f%05d", i))
	}
	p := h.reads.Parents(me, "")
	rs := readsRecords(t, h)
	total := 0
	for i, r := range rs {
		total += len(r.Payload.Reads)
		if i > 0 && (len(r.Parents) != 1 || r.Parents[0] == "") {
			t.Fatalf("record %d not chained: %v", i, r.Parents)
		}
	}
	if total != readsPendingMax+10 || len(rs) < 2 || len(p) != 1 {
		t.Fatalf("%d reads in %d records, parents %v", total, len(rs), p)
	}
}

// BenchmarkReadOpened is the cost a read adds to an open: a file already
// listed (the common case: the same files are read again and again), and
// a new one.
func BenchmarkReadOpened(b *testing.B) {
	ws := b.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644)
	h, res := benchHouse(b, ws)
	var st syscall.Stat_t
	syscall.Lstat(filepath.Join(ws, "f"), &st)
	b.Run("seen", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			h.readOpened(NoCaller, res, "f", &st, nil, syscall.O_RDONLY)
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			st.Mtim.Nsec = int64(i) // another version each time
			h.readOpened(NoCaller, res, "f", &st, nil, syscall.O_RDONLY)
		}
	})
}

func benchHouse(b *testing.B, ws string) (*house, *principal.Resolved) {
	h, _, _ := testHouseIn(b, ws)
	return h, h.reg.Resolve(os.Getpid())
}

// A file too big to hash at a change is listed by its fingerprint.
func TestReadsBigFileByFingerprint(t *testing.T) {
	h, ws, _ := testHouse(t, map[string]string{"small": "s"})
	if err := os.Truncate(filepath.Join(ws, "small"), 4<<20+1); err != nil {
		t.Fatal(err)
	}
	me := h.reg.Resolve(os.Getpid())
	h.testRead(t, me, "small")
	h.reads.Parents(me, "")
	rs := readsRecords(t, h)
	if len(rs) != 1 || rs[0].Payload.Reads[0].Hash != "" || rs[0].Payload.Reads[0].Fp == "" {
		t.Fatalf("big file listed as %+v", rs)
	}
}

// BenchmarkPlainWriteOpen is what the guard adds to the open of a plain
// file for writing by a trusted writer (the bench's open(O_WRONLY) row),
// and to its close (flush and release: the writers resolved again).
func BenchmarkPlainWriteOpen(b *testing.B) {
	ws := b.TempDir()
	os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644)
	h, _ := benchHouse(b, ws)
	d := &Door{h: h}
	c := Caller{Pid: os.Getpid(), UID: uint32(os.Geteuid())}
	var st syscall.Stat_t
	syscall.Lstat(filepath.Join(ws, "f"), &st)
	nop := func(*syscall.Stat_t) syscall.Errno { return 0 }
	stat := func() *syscall.Stat_t { return &st }
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			o, errno := d.Open(c, "f", syscall.O_WRONLY, nop)
			if errno != 0 {
				b.Fatal(errno)
			}
			b.StopTimer()
			if o.Plain != nil {
				o.Plain.Release(stat)
			}
			b.StartTimer()
		}
	})
	b.Run("close", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			o, _ := d.Open(c, "f", syscall.O_WRONLY, nop)
			b.StartTimer()
			if o.Plain != nil {
				o.Plain.Flush(c, stat)
				o.Plain.Release(stat)
			}
		}
	})
}

// A session the registry retires is forgotten by the guard: what it read
// since its last change is listed first (nothing it read is missing from
// the log), and back from retirement its chain continues from its newest
// reads record (Config.LastReads).
func TestRetiredSessionReadsListedThenForgotten(t *testing.T) {
	h, _, _ := testHouse(t, map[string]string{"notes/src.md": "poison\n", "notes/b.md": "b\n"})
	arch := retiredArchive{}
	h.reg.SetArchive(arch)
	h.reg.Restore("agent", policy.User, "", "", 0, time.Now())
	s := h.reg.Session("agent")
	me := h.reg.Resolve(os.Getpid())
	res := &principal.Resolved{Proc: me.Proc, Session: s, Principal: policy.User, Identified: true}
	h.testRead(t, res, "notes/src.md")
	s.MarkEnded(time.Now())
	if got := h.reg.Retire(h.reg.Retirees()); len(got) != 1 {
		t.Fatalf("retired %d sessions, want 1", len(got))
	}
	rs, ids := readsWithIDs(t, h)
	if len(rs) != 1 || rs[0].Meta.Session != "agent" || rs[0].Payload.Reads[0].Path != "notes/src.md" {
		t.Fatalf("the retired session's reads were not listed: %d records", len(rs))
	}
	last := ids[0]
	h.reads.SetLastReads(func(id string) string {
		if id == "agent" {
			return last
		}
		return ""
	})
	// Back (resumed): a new read's record names the one listed at
	// retirement, and its next change names the new one.
	arch["agent"] = principal.ArchivedSession{ID: "agent", Principal: policy.User, Started: time.Now()}
	back := &principal.Resolved{Proc: me.Proc, Session: h.reg.Session("agent"), Principal: policy.User, Identified: true}
	if back.Session == nil || back.Session == s {
		t.Fatal("the retired session was not forgotten by the registry, or not found again")
	}
	h.testRead(t, back, "notes/b.md")
	p := h.reads.Parents(back, "")
	rs, ids = readsWithIDs(t, h)
	if len(rs) != 2 || len(rs[1].Parents) != 1 || rs[1].Parents[0] != last || len(p) != 1 || p[0] != ids[1] {
		t.Fatalf("the chain does not continue: %d records, parents %v", len(rs), p)
	}
}

type retiredArchive map[string]principal.ArchivedSession

func (a retiredArchive) ArchivedSession(id string) (principal.ArchivedSession, bool) {
	s, ok := a[id]
	return s, ok
}

func (a retiredArchive) ArchivedCgroup(string) (principal.ArchivedSession, bool) {
	return principal.ArchivedSession{}, false
}

// readsWithIDs is readsRecords with the records' ids.
func readsWithIDs(t *testing.T, h *house) ([]*evidence.Record, []string) {
	if err := h.led.Flush(); err != nil {
		t.Fatal(err)
	}
	var rs []*evidence.Record
	var ids []string
	if err := evidence.ReadAll(h.stateDir, func(_ int64, id string, r *evidence.Record) error {
		if r.Type == evidence.TypeReads {
			rs, ids = append(rs, r), append(ids, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rs, ids
}
