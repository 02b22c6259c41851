package evidence

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

func TestConcurrentAppend(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	const workers, each = 32, 40
	var wg sync.WaitGroup
	ids := make([][]string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			prev := ""
			for i := 0; i < each; i++ {
				r := sampleRecord(i)
				r.Meta.Session = fmt.Sprintf("w%d", w)
				r.Meta.Reason = fmt.Sprintf("worker %d record %d", w, i)
				if prev != "" {
					r.Parents = []string{prev}
				}
				id, err := l.Append(r)
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
				prev = id
			}
		}(w)
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pos := map[string]int64{}
	err := ReadAll(dir, func(idx int64, id string, r *Record) error {
		pos[id] = idx
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pos) != workers*each {
		t.Fatalf("%d records, want %d", len(pos), workers*each)
	}
	for w := range ids {
		for i := 1; i < len(ids[w]); i++ {
			if pos[ids[w][i]] <= pos[ids[w][i-1]] {
				t.Fatalf("worker %d: record %d precedes its predecessor", w, i)
			}
		}
	}
	rep, err := VerifyState(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != workers*each {
		t.Fatalf("verified %d", rep.Records)
	}
}

// appendN appends n records and returns the state dir's checkpoint after
// each append.
func appendN(t *testing.T, dir string, n int) [][]byte {
	l := openLog(t, dir)
	defer l.Close()
	var cps [][]byte
	for i := 0; i < n; i++ {
		if _, err := l.Append(sampleRecord(i)); err != nil {
			t.Fatal(err)
		}
		cp, _ := l.Checkpoint()
		cps = append(cps, cp)
	}
	return cps
}

func lastRecord(t *testing.T, dir string) *Record {
	var last *Record
	if err := ReadAll(dir, func(_ int64, _ string, r *Record) error { last = r; return nil }); err != nil {
		t.Fatal(err)
	}
	return last
}

// TestTornTail simulates crashes that leave partial or unconfirmed data
// past the signed checkpoint: Open cuts it, records the cut, and the log
// verifies.
func TestTornTail(t *testing.T) {
	ev := func(d, n string) string { return filepath.Join(d, "evidence", n) }
	cases := []struct {
		name   string
		crash  func(t *testing.T, d string, cps [][]byte)
		kept   int64 // records kept from the 5 appended
		cut    bool  // a recovery record is expected
		detail string
	}{
		{"garbage appended to log", func(t *testing.T, d string, _ [][]byte) {
			f, _ := os.OpenFile(ev(d, "log"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("{\"garbage\": tru")
			f.Close()
		}, 5, true, "cut 15 log bytes, 0 index entries"},
		{"partial record and partial index entry", func(t *testing.T, d string, _ [][]byte) {
			c, _ := sampleRecord(9).Canonical()
			f, _ := os.OpenFile(ev(d, "log"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(c[:len(c)/2])
			f.Close()
			f, _ = os.OpenFile(ev(d, "index"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(make([]byte, 13))
			f.Close()
		}, 5, true, "1 index entries"},
		{"last batch written, checkpoint not: record kept", func(t *testing.T, d string, cps [][]byte) {
			writeFile(t, ev(d, "checkpoint"), string(cps[3]))
		}, 5, false, ""},
		{"last batch written, checkpoint not, log line torn, its journal frame not durable", func(t *testing.T, d string, cps [][]byte) {
			writeFile(t, ev(d, "checkpoint"), string(cps[3]))
			fi, _ := os.Stat(ev(d, "log"))
			os.Truncate(ev(d, "log"), fi.Size()-7)
			os.Truncate(ev(d, "journal"), 0)
		}, 4, true, "last good record 3"},
		{"last batch acknowledged (journal frame durable), checkpoint not, log line torn: rebuilt from the journal", func(t *testing.T, d string, cps [][]byte) {
			copyFile(t, ev(d, "checkpoint.initial"), ev(d, "checkpoint"))
			fi, _ := os.Stat(ev(d, "log"))
			os.Truncate(ev(d, "log"), fi.Size()-7)
		}, 5, true, "journal: 1 acknowledged records rebuilt"},
		{"acknowledged records lost from the log whole: rebuilt from the journal", func(t *testing.T, d string, cps [][]byte) {
			copyFile(t, ev(d, "checkpoint.initial"), ev(d, "checkpoint"))
			os.Truncate(ev(d, "log"), 0)
			os.Truncate(ev(d, "index"), 0)
			os.Truncate(ev(d, "hashes"), 0)
		}, 5, true, "journal: 5 acknowledged records rebuilt"},
		{"last batch written, checkpoint not, stored hash wrong: rebuilt from the log", func(t *testing.T, d string, cps [][]byte) {
			writeFile(t, ev(d, "checkpoint"), string(cps[3]))
			// Record 4's leaf is stored hash index StoredHashIndex(0,4) = 7.
			flipByteAt(t, ev(d, "hashes"), 7*32)
		}, 5, false, ""},
		{"log flushed, index and hashes of the last batch not: rebuilt", func(t *testing.T, d string, cps [][]byte) {
			writeFile(t, ev(d, "checkpoint"), string(cps[2]))
			// Records 3 and 4 are in the log; their index entries and
			// stored hashes never reached the disk.
			os.Truncate(ev(d, "index"), 3*indexEntrySize)
			os.Truncate(ev(d, "hashes"), tlog.StoredHashCount(3)*tlog.HashSize)
		}, 5, false, ""},
		{"log flushed, index entry of the last record wrong: rebuilt", func(t *testing.T, d string, cps [][]byte) {
			writeFile(t, ev(d, "checkpoint"), string(cps[3]))
			flipByteAt(t, ev(d, "index"), 4*indexEntrySize+8)
		}, 5, false, ""},
		{"index entries past the log's last whole line: cut", func(t *testing.T, d string, cps [][]byte) {
			writeFile(t, ev(d, "checkpoint"), string(cps[3]))
			fi, _ := os.Stat(ev(d, "log"))
			os.Truncate(ev(d, "log"), fi.Size()-1) // record 4's newline lost
			os.Truncate(ev(d, "journal"), 0)       // and its frame
		}, 4, true, "1 index entries"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.name, "journal:") || strings.Contains(tc.name, "from the journal") {
				// No checkpoint until Close: the state a crash leaves
				// while the records are only in the journal.
				d0, e0 := checkpointDelay, checkpointEvery
				checkpointDelay, checkpointEvery = time.Hour, time.Hour
				defer func() { checkpointDelay, checkpointEvery = d0, e0 }()
			}
			d := newState(t)
			copyFile(t, ev(d, "checkpoint"), ev(d, "checkpoint.initial"))
			cps := appendN(t, d, 5)
			tc.crash(t, d, cps)
			l, err := Open(d)
			if err != nil {
				t.Fatal(err)
			}
			size := l.Size()
			l.Close()
			want := tc.kept
			if tc.cut {
				want++
			}
			if size != want {
				t.Fatalf("size %d, want %d", size, want)
			}
			last := lastRecord(t, d)
			if tc.cut {
				if last.Type != TypeRecovery || !strings.Contains(last.Payload.Detail, tc.detail) {
					t.Fatalf("last record %+v, want recovery with %q", last, tc.detail)
				}
				t.Log(last.Payload.Detail)
			} else if last.Type == TypeRecovery {
				t.Fatal("unexpected recovery record")
			}
			if _, err := VerifyState(d, ""); err != nil {
				t.Fatal(err)
			}
			// Appends continue after recovery.
			l = openLog(t, d)
			if _, err := l.Append(sampleRecord(77)); err != nil {
				t.Fatal(err)
			}
			l.Close()
			if _, err := VerifyState(d, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}

// TestTruncatedBelowCheckpoint: losing records the checkpoint covers is
// not a crash tail. Open refuses instead of cutting, and VerifyState names
// the damage.
func TestTruncatedBelowCheckpoint(t *testing.T) {
	d := newState(t)
	appendN(t, d, 5)
	rd, _ := openReader(d)
	start, _, _, _ := readEntry(rd.index, 3)
	rd.Close()
	os.Truncate(filepath.Join(d, "evidence", "log"), start+5)
	if _, err := Open(d); err == nil || !strings.Contains(err.Error(), "below its signed checkpoint") {
		t.Fatalf("Open: %v", err)
	}
	_, err := VerifyState(d, "")
	checkKind(t, err, KindIntegrity, "record 3: truncated")
}

// A blob travels in the journal frame of the record that first names it. A
// crash can leave such a record (never acknowledged: its frame not
// durable) in the log past the checkpoint without its blob: Open cuts it
// there. With the blob in place the record is kept.
func TestTailRecordWithLostBlob(t *testing.T) {
	ev := func(d, n string) string { return filepath.Join(d, "evidence", n) }
	for _, lost := range []bool{true, false} {
		t.Run(fmt.Sprint("blob lost: ", lost), func(t *testing.T) {
			d := newState(t)
			l := openLog(t, d)
			for i := 0; i < 2; i++ {
				if _, err := l.Append(sampleRecord(i)); err != nil {
					t.Fatal(err)
				}
			}
			cp, _ := l.Checkpoint()
			h, err := l.PutBlob([]byte("the content a write recorded\n"))
			if err != nil {
				t.Fatal(err)
			}
			r := sampleRecord(2)
			r.Payload = &Payload{NewHash: h}
			if _, err := l.Append(r); err != nil {
				t.Fatal(err)
			}
			l.Close()
			// The crash: the checkpoint still covers two records, and
			// (when lost) the blob's name never reached the disk.
			writeFile(t, ev(d, "checkpoint"), string(cp))
			if lost {
				loseBlob(t, ev(d, ""), h)
				os.Truncate(ev(d, "journal"), 0)
			}
			l = openLog(t, d)
			size := l.Size()
			l.Close()
			last := lastRecord(t, d)
			if lost {
				if size != 3 || last.Type != TypeRecovery || !strings.Contains(last.Payload.Detail, "last good record 1") {
					t.Fatalf("size %d, last %+v: want the record without its blob cut", size, last)
				}
			} else if size != 3 || last.Type == TypeRecovery {
				t.Fatalf("size %d, last %+v: want the record kept", size, last)
			}
			if _, err := VerifyState(d, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzRecoverTail changes only what lies past the signed checkpoint (the
// tail of the log, the index and the hashes file: cut at some point, then
// arbitrary bytes appended) and checks that Open recovers: every
// checkpointed record survives, and the log verifies afterwards.
func FuzzRecoverTail(f *testing.F) {
	f.Add([]byte(""), []byte(""), []byte(""), uint16(0), uint16(0), uint16(0))
	f.Add([]byte("{\"garbage\": tru"), []byte{1, 2, 3}, []byte{9}, uint16(7), uint16(0), uint16(0))
	f.Add([]byte("\n\n{}\n"), []byte(""), []byte(""), uint16(1000), uint16(40), uint16(32))
	f.Add([]byte(""), make([]byte, 40), make([]byte, 64), uint16(0), uint16(80), uint16(96))
	f.Fuzz(func(t *testing.T, logTail, idxTail, hashTail []byte, logCut, idxCut, hashCut uint16) {
		ev := func(d, n string) string { return filepath.Join(d, "evidence", n) }
		d := newState(t)
		cps := appendN(t, d, 5)
		const kept = 3 // the checkpoint is put back to three records
		writeFile(t, ev(d, "checkpoint"), string(cps[kept-1]))
		idx, err := os.ReadFile(ev(d, "index"))
		if err != nil {
			t.Fatal(err)
		}
		_, logFloor, _, err := readEntry(bytes.NewReader(idx), kept-1)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			name  string
			floor int64
			cut   uint16
			tail  []byte
		}{
			{"log", logFloor, logCut, logTail},
			{"index", kept * indexEntrySize, idxCut, idxTail},
			{"hashes", tlog.StoredHashCount(kept) * tlog.HashSize, hashCut, hashTail},
		} {
			fi, err := os.Stat(ev(d, p.name))
			if err != nil {
				t.Fatal(err)
			}
			size := max(p.floor, fi.Size()-int64(p.cut))
			if err := os.Truncate(ev(d, p.name), size); err != nil {
				t.Fatal(err)
			}
			fh, err := os.OpenFile(ev(d, p.name), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.Write(p.tail)
			fh.Close()
		}
		l, err := Open(d)
		if err != nil {
			t.Fatalf("open after a change past the checkpoint: %v", err)
		}
		size := l.Size()
		l.Close()
		if size < kept {
			t.Fatalf("%d records after recovery, the checkpoint covered %d", size, kept)
		}
		if _, err := VerifyState(d, ""); err != nil {
			t.Fatalf("verify after recovery: %v", err)
		}
	})
}
