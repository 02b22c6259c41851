package evidence

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The non-UTF-8 name vector (docs/evidence-format.md §3.1, §10):
// testdata/vectors/names.json. Regenerate with AERFS_UPDATE_VECTORS=1
// only if the record format version changes.

const nameVectorFile = "testdata/vectors/names.json"

func nameVectorRecords() []*Record {
	return []*Record{
		{Version: RecordVersion, Type: TypeVerdict, Principal: "WEB", Taint: []string{"WEB_DERIVED"}, Parents: []string{},
			Meta: Meta{Time: "2026-03-01T12:00:07Z", UID: 1000, Pid: 4300, Session: "s2", Op: "write", Verdict: "deny", Rule: "R2",
				Reason: "tainted writer: WEB_DERIVED", Path: "memory/\xff.md"}},
		{Version: RecordVersion, Type: TypeRename, Principal: "USER", Taint: []string{}, Parents: []string{},
			Meta:    Meta{Time: "2026-03-01T12:00:08Z", UID: 1000, Op: "rename", Verdict: "allow", Path: "memory/\xff.md"},
			Payload: &Payload{From: "memory/\xff.md", To: "memory/caf\xe9.md"}},
		{Version: RecordVersion, Type: TypeSnapshot, Principal: "USER", Taint: []string{}, Parents: []string{},
			Meta: Meta{Time: "2026-03-01T12:00:09Z", UID: 1000, Op: "snapshot", Verdict: "allow"},
			Payload: &Payload{Files: []FileState{
				{Path: "MEMORY.md", Hash: sha256Hex([]byte("a"))},
				{Path: "memory/caf\xe9.md", Hash: sha256Hex([]byte("b"))},
			}}},
	}
}

func TestNameVectors(t *testing.T) {
	rs := nameVectorRecords()
	for _, r := range rs {
		r.normalizeNames()
	}
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
		writeFile(t, nameVectorFile, string(b)+"\n")
	}
	var rv []recordVector
	if err := json.Unmarshal([]byte(readFile(t, nameVectorFile)), &rv); err != nil {
		t.Fatal(err)
	}
	if len(rv) != len(rs) {
		t.Fatalf("%d vectors", len(rv))
	}
	want := [][]string{
		{"memory/\xff.md", "", ""},
		{"memory/\xff.md", "memory/\xff.md", "memory/caf\xe9.md"},
		{"", "", ""},
	}
	for i, v := range rv {
		c, err := rs[i].Canonical()
		if err != nil || string(c) != v.Canonical || IDOf(c) != v.ID {
			t.Fatalf("vector %d: built record gives\n%s %s (%v)\nwant\n%s %s", i, c, IDOf(c), err, v.Canonical, v.ID)
		}
		var r Record
		if err := json.Unmarshal(v.Record, &r); err != nil {
			t.Fatal(err)
		}
		if c, err := r.Canonical(); err != nil || string(c) != v.Canonical {
			t.Fatalf("vector %d: decoded record: %s %v", i, c, err)
		}
		p, err := ParseRecord([]byte(v.Canonical))
		if err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		if p.Meta.FilePath() != want[i][0] || p.Payload.FromPath() != want[i][1] || p.Payload.ToPath() != want[i][2] {
			t.Fatalf("vector %d: names %q %q %q", i, p.Meta.FilePath(), p.Payload.FromPath(), p.Payload.ToPath())
		}
		if strings.Contains(v.Canonical, `"path":"memory/\ufffd`) {
			t.Fatalf("vector %d: a name was replaced, not encoded", i)
		}
	}
	if f := rs[2].Payload.Files[1]; f.FilePath() != "memory/caf\xe9.md" || f.Path != "" {
		t.Fatalf("snapshot file: %+v", f)
	}
}

// TestNameFieldsStrict: a record carrying both forms, neither where one
// is required, a _b64 that is valid UTF-8 or not canonical base64, or
// raw invalid UTF-8, is refused by Validate and so by every reader.
func TestNameFieldsStrict(t *testing.T) {
	base := func() *Record {
		r := sampleRecord(0)
		r.Version, r.Meta.Time = RecordVersion, "2026-03-01T12:00:00Z"
		return r
	}
	hash := sha256Hex([]byte("x"))
	cases := map[string]func(r *Record){
		"both path forms":      func(r *Record) { r.Meta.PathB64 = "bWVtb3J5L/8ubWQ=" },
		"b64 of UTF-8":         func(r *Record) { r.Meta.Path, r.Meta.PathB64 = "", "TUVNT1JZLm1k" },
		"b64 not canonical":    func(r *Record) { r.Meta.Path, r.Meta.PathB64 = "", "bWVtb3J5L/8ubWQ" },
		"b64 not base64":       func(r *Record) { r.Meta.Path, r.Meta.PathB64 = "", "!!!!" },
		"raw invalid path":     func(r *Record) { r.Meta.Path = "memory/\xff.md" },
		"both from forms":      func(r *Record) { r.Payload = &Payload{From: "a", FromB64: "/w=="} },
		"raw invalid to":       func(r *Record) { r.Payload = &Payload{To: "\xff"} },
		"file with neither":    func(r *Record) { r.Payload = &Payload{Files: []FileState{{Hash: hash}}} },
		"file with both forms": func(r *Record) { r.Payload = &Payload{Files: []FileState{{Path: "a", PathB64: "/w==", Hash: hash}}} },
		"exe both forms":       func(r *Record) { r.Meta.Exe, r.Meta.ExeB64 = "/bin/x", "/w==" },
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	ok := base()
	ok.Meta.Path, ok.Meta.PathB64 = "", "bWVtb3J5L/8ubWQ="
	c, err := ok.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseRecord(c); err != nil {
		t.Fatalf("a path_b64 record does not parse: %v", err)
	}
	for name, mod := range cases {
		r := base()
		mod(r)
		if err := r.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		// Hand-made bytes in the canonical layout are refused too.
		if b, err := json.Marshal(r); err == nil {
			if _, err := ParseRecord(b); err == nil {
				t.Errorf("%s: ParseRecord accepted %s", name, b)
			}
		}
	}
}

// TestAppendNonUTF8Name: Append records a name that is not UTF-8 instead
// of failing, and the log and a bundle filtered by that name verify.
func TestAppendNonUTF8Name(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	r := sampleRecord(0)
	r.Meta.Path, r.Meta.Exe, r.Meta.Reason = "memory/\xff.md", "/usr/bin/\xfe", "about memory/\xff.md"
	if _, err := l.Append(r); err != nil {
		t.Fatalf("append: %v", err)
	}
	l.Close()
	var got *Record
	if err := ReadAll(dir, func(_ int64, _ string, r *Record) error { got = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if got.Meta.FilePath() != "memory/\xff.md" || got.Meta.ExePath() != "/usr/bin/\xfe" || got.Meta.Path != "" {
		t.Fatalf("read back %+v", got.Meta)
	}
	if _, err := VerifyState(dir, ""); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b")
	m, err := Export(dir, Filter{Path: "memory/\xff.md"}, out)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := VerifyBundle(out, ""); err != nil || rep.Records != 1 {
		t.Fatalf("bundle %+v: %+v %v", m, rep, err)
	}
	if m.Filter.Path != "" || m.Filter.PathB64 != "bWVtb3J5L/8ubWQ=" {
		t.Fatalf("manifest filter %+v", m.Filter)
	}
}
