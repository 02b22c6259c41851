package evidence

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// Seeds live in testdata/fuzz/<FuzzName>/ (go test's corpus format); the
// f.Add calls cover the shapes the parsers must reject as well.

func FuzzParseRecord(f *testing.F) {
	c, _ := sampleRecordFixed().Canonical()
	f.Add(c)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"meta":{"time":"2026-01-01T00:00:00Z","uid":0},"parents":[],"principal":"SYS","taint":[],"type":"mount","type":"mount","v":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRecord(data)
		if err != nil {
			if KindOf(err) != KindSchema {
				t.Fatalf("error without schema kind: %v", err)
			}
			return
		}
		c, err := r.Canonical()
		if err != nil || !bytes.Equal(c, data) {
			t.Fatalf("accepted record is not its own canonical form: %v", err)
		}
	})
}

func FuzzCanonicalRoundTrip(f *testing.F) {
	b, _ := json.Marshal(sampleRecordFixed())
	f.Add(b)
	f.Add([]byte(`{"v":1,"type":"write","principal":"USER","taint":["WEB_DERIVED"],"parents":[],"meta":{"time":"2026-02-03T04:05:06.789Z","uid":1,"path":"\u00e9\u2028<>&"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Record
		if json.Unmarshal(data, &r) != nil || r.Validate() != nil {
			return
		}
		c, err := r.Canonical()
		if err != nil {
			return // e.g. over MaxRecordSize
		}
		ref, err := canonicalJCS(&r)
		if err != nil || !bytes.Equal(ref, c) {
			t.Fatalf("encoder differs from the jcs reference:\n got %s\nwant %s", c, ref)
		}
		again, err := jcs.Transform(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("canonical form is not a fixed point: %v", err)
		}
		p, err := ParseRecord(c)
		if err != nil {
			t.Fatalf("canonical record rejected: %v\n%s", err, c)
		}
		c2, _ := p.Canonical()
		if !bytes.Equal(c, c2) || IDOf(c) != IDOf(c2) {
			t.Fatal("round trip changed the record")
		}
	})
}

func FuzzReadBundle(f *testing.F) {
	f.Add([]byte(goldenManifestSeed))
	f.Add([]byte(`{"format":"aerfs-evidence-bundle","version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			if KindOf(err) != KindSchema {
				t.Fatalf("manifest error without schema kind: %v", err)
			}
			return
		}
		b, _ := json.Marshal(m)
		if _, err := parseManifest(b); err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
	})
}

func FuzzZipReader(f *testing.F) {
	f.Add(makeZip(f, []zipEntry{{name: "manifest.json", data: "{}"}, {name: "blobs/", mode: 0o40000 | 0o755}}))
	f.Add(makeZip(f, []zipEntry{{name: "../evil", data: "x"}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxEntries: 64, MaxEntrySize: 1 << 20, MaxTotalSize: 4 << 20}
		files, err := readZip(bytes.NewReader(data), int64(len(data)), lim)
		if err != nil {
			if KindOf(err) != KindIO {
				t.Fatalf("zip error without io kind: %v", err)
			}
			return
		}
		var total int
		for name, b := range files {
			if checkName(name) != nil {
				t.Fatalf("accepted bad name %q", name)
			}
			total += len(b)
		}
		if len(files) > lim.MaxEntries || total > int(lim.MaxTotalSize) {
			t.Fatal("limits not enforced")
		}
		verifyBundleFiles(files, "", nil) // must not panic
	})
}

func TestCanonicalMatchesJCS(t *testing.T) {
	rs := append(vectorRecords(), sampleRecordFixed())
	weird := sampleRecordFixed()
	weird.Meta.Reason = "\x00\x01\b\t\n\f\r\x1f\x7f \"\\ / <>& \u2028\u2029 \U0001F600 é"
	weird.Payload = &Payload{}
	rs = append(rs, weird)
	snap := sampleRecordFixed()
	snap.Type = TypeRestore
	snap.Payload = &Payload{Detail: "to snapshot", Files: []FileState{
		{Path: "MEMORY.md", OldHash: snap.Parents[0], Hash: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
		{Path: "memory/é \"x\".md"},
		{Path: "skills/a/SKILL.md", Hash: snap.Parents[0]},
	}}
	rs = append(rs, snap)
	folded := sampleRecordFixed()
	folded.Type, folded.Meta.Verdict, folded.Meta.Folded, folded.Meta.Class = TypeVerdict, "deny", 1234, "none"
	rs = append(rs, folded)
	for i, r := range rs {
		c, err := r.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := canonicalJCS(r)
		if err != nil || !bytes.Equal(c, ref) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, c, ref)
		}
	}
}

func sampleRecordFixed() *Record {
	return &Record{
		Version: 1, Type: TypeWrite, Principal: "USER", Taint: []string{"TOOL_OUTPUT"},
		Parents: []string{"3fa85f6457174562b3fc2c963f66afa63fa85f6457174562b3fc2c963f66afa6"},
		Meta: Meta{Time: "2026-03-01T12:00:00.123456789Z", Path: "MEMORY.md", Op: "write",
			Verdict: "allow", Pid: 4242, Exe: "/usr/bin/vim", UID: 1000, Session: "s1", Rule: "R3"},
		Payload: &Payload{NewHash: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
	}
}

const goldenManifestSeed = `{
  "format": "aerfs-evidence-bundle",
  "version": 1,
  "created": "2026-03-01T12:00:00Z",
  "origin": "test.aerfs/vectors",
  "tree_size": 7,
  "root_hash": "0000000000000000000000000000000000000000000000000000000000000000",
  "key_id": "01234567",
  "public_key": "x",
  "complete": true,
  "filter": {"since": "", "session": "", "path": "", "type": ""},
  "record_count": 7,
  "ref_count": 0,
  "blob_count": 0
}`
