package evidence

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The reads vector (docs/evidence-format.md §3.2, §10):
// testdata/vectors/reads.json: a reads record of session s1 (one file
// whose content is known, one whose name is not UTF-8 and whose content is
// not), the next one naming it as its parent (a file changed before it
// could be hashed: its fingerprint), and the write that names the second. Regenerate with AERFS_UPDATE_VECTORS=1 only if the record
// format version changes.

const readsVectorFile = "testdata/vectors/reads.json"

func readsVectorRecords() []*Record {
	first := &Record{Version: RecordVersion, Type: TypeReads, Principal: "USER", Taint: []string{}, Parents: []string{},
		Meta: Meta{Time: "2026-03-01T12:00:10Z", UID: 1000, Pid: 4400, Exe: "/usr/bin/sh", Session: "s1", Op: "read",
			Reason: "files read by the session"},
		Payload: &Payload{Reads: []FileRead{
			{Path: "notes/src.md", Hash: sha256Hex([]byte("ignore previous instructions\n"))},
			{Path: "notes/\xff.txt", Fp: "2049:131076:8388608:1772366401500000000:1772366401500000000"},
		}}}
	first.normalizeNames() // the name that is not UTF-8 goes to path_b64, as Append does
	id1, err := first.ID()
	if err != nil {
		panic(err)
	}
	second := &Record{Version: RecordVersion, Type: TypeReads, Principal: "USER", Taint: []string{}, Parents: []string{id1},
		Meta: Meta{Time: "2026-03-01T12:00:11Z", UID: 1000, Pid: 4400, Exe: "/usr/bin/sh", Session: "s1", Op: "read",
			Reason: "files read by the session"},
		Payload: &Payload{Reads: []FileRead{
			{Path: "notes/src.md", Fp: "2049:131075:3:1772366410000000000:1772366410000000000"},
		}}}
	id2, err := second.ID()
	if err != nil {
		panic(err)
	}
	write := &Record{Version: RecordVersion, Type: TypeWrite, Principal: "USER", Taint: []string{}, Parents: []string{id2},
		Meta: Meta{Time: "2026-03-01T12:00:12Z", UID: 1000, Pid: 4400, Exe: "/usr/bin/sh", Session: "s1", Path: "MEMORY.md",
			Op: "write", Verdict: "allow", Rule: "R3"},
		Payload: &Payload{NewHash: sha256Hex([]byte("m1\n"))}}
	return []*Record{first, second, write}
}

func TestReadsVectors(t *testing.T) {
	rs := readsVectorRecords()
	if os.Getenv("AERFS_UPDATE_VECTORS") != "" {
		var rv []recordVector
		for _, r := range rs {
			c, err := r.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.MarshalIndent(r, "    ", "  ")
			rv = append(rv, recordVector{Record: raw, Canonical: string(c), ID: IDOf(c)})
		}
		b, _ := json.MarshalIndent(rv, "", "  ")
		writeFile(t, readsVectorFile, string(b)+"\n")
	}
	var rv []recordVector
	if err := json.Unmarshal([]byte(readFile(t, readsVectorFile)), &rv); err != nil {
		t.Fatal(err)
	}
	if len(rv) != len(rs) {
		t.Fatalf("%d vectors", len(rv))
	}
	for i, v := range rv {
		c, err := rs[i].Canonical()
		if err != nil || string(c) != v.Canonical || IDOf(c) != v.ID {
			t.Fatalf("vector %d: built record gives\n%s %s (%v)\nwant\n%s %s", i, c, IDOf(c), err, v.Canonical, v.ID)
		}
		ref, err := canonicalJCS(rs[i])
		if err != nil || !bytes.Equal(ref, c) {
			t.Fatalf("vector %d: JCS reference\n%s\n%s", i, ref, c)
		}
		p, err := ParseRecord([]byte(v.Canonical))
		if err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		if len(p.Payload.BlobRefs()) != 0 && p.Type == TypeReads {
			t.Fatalf("vector %d: a read's hash is not a blob reference", i)
		}
	}
	if got := rs[0].Payload.Reads[1]; got.FilePath() != "notes/\xff.txt" || got.Path != "" {
		t.Fatalf("non-UTF-8 read path: %+v", got)
	}
	if rs[1].Parents[0] != rv[0].ID || rs[2].Parents[0] != rv[1].ID {
		t.Fatal("chain broken")
	}
}

func TestReadsFieldsStrict(t *testing.T) {
	base := func() *Record { return readsVectorRecords()[1] }
	cases := map[string]func(r *Record){
		"empty reads":        func(r *Record) { r.Payload.Reads = []FileRead{} },
		"no path":            func(r *Record) { r.Payload.Reads[0].Path = "" },
		"both path forms":    func(r *Record) { r.Payload.Reads[0].PathB64 = "/w==" },
		"raw invalid path":   func(r *Record) { r.Payload.Reads[0].Path = "\xff" },
		"bad hash":           func(r *Record) { r.Payload.Reads[0].Fp, r.Payload.Reads[0].Hash = "", "ABC" },
		"neither version":    func(r *Record) { r.Payload.Reads[0].Fp = "" },
		"both versions":      func(r *Record) { r.Payload.Reads[0].Hash = sha256Hex(nil) },
		"fp four fields":     func(r *Record) { r.Payload.Reads[0].Fp = "1:2:3:4" },
		"fp leading zero":    func(r *Record) { r.Payload.Reads[0].Fp = "1:02:3:4:5" },
		"fp negative inode":  func(r *Record) { r.Payload.Reads[0].Fp = "1:-2:3:4:5" },
		"fp minus zero time": func(r *Record) { r.Payload.Reads[0].Fp = "1:2:3:-0:5" },
		"fp trailing":        func(r *Record) { r.Payload.Reads[0].Fp = "1:2:3:4:5:" },
		"fp space":           func(r *Record) { r.Payload.Reads[0].Fp = "1:2:3:4: 5" },
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	neg := base()
	neg.Payload.Reads[0].Fp = "0:1:0:-1:-1500000000"
	if err := neg.Validate(); err != nil {
		t.Fatalf("times before 1970: %v", err)
	}
	for name, mod := range cases {
		r := base()
		mod(r)
		if err := r.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if b, err := json.Marshal(r); err == nil {
			if _, err := ParseRecord(b); err == nil {
				t.Errorf("%s: ParseRecord accepted %s", name, b)
			}
		}
	}
	// A read without a version is refused.
	c, _ := base().Canonical()
	cut := strings.Replace(string(c), `"fp":"2049:131075:3:1772366410000000000:1772366410000000000",`, "", 1)
	if _, err := ParseRecord([]byte(cut)); err == nil {
		t.Fatal("a read without a version parsed")
	}
	// Append writes a name that is not UTF-8 as path_b64.
	dir := newState(t)
	l := openLog(t, dir)
	r := readsVectorRecords()[0]
	r.Payload.Reads[1].Path, r.Payload.Reads[1].PathB64 = "notes/\xff.txt", ""
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := VerifyState(dir, ""); err != nil {
		t.Fatal(err)
	}
}
