package evidence

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Test vectors (docs/evidence-format.md §10). Regenerate with
// AERFS_UPDATE_VECTORS=1 go test -run TestVectors ./evidence/ — only when
// the format version changes; the golden bundle must keep verifying.

const vecDir = "testdata/vectors"

type recordVector struct {
	Record    json.RawMessage `json:"record"`
	Canonical string          `json:"canonical"`
	ID        string          `json:"id"`
}

func vectorRecords() []*Record {
	t := func(s string) string { return "2026-03-01T12:00:0" + s + "Z" }
	blobA := sha256Hex([]byte("I am the agent's soul.\n"))
	blobB := sha256Hex([]byte("Remember: the user prefers tabs.\n"))
	var ids []string
	rs := []*Record{
		{Type: TypeMount, Principal: "SYS", Meta: Meta{Time: t("0"), UID: 0, Path: "/home/u/ws", Reason: "mount"}},
		{Type: TypeSessionStart, Principal: "TOOL_AUTH", Meta: Meta{Time: t("1.1"), UID: 1000, Pid: 4242, Exe: "/usr/bin/agent", Session: "s1"}},
		{Type: TypeTaint, Principal: "WEB", Taint: []string{"WEB_DERIVED", "UNTRUSTED"}, Meta: Meta{Time: t("2.123456789"), UID: 1000, Pid: 4250, Exe: "/usr/bin/curl", Session: "s1"}},
		{Type: TypeVerdict, Principal: "TOOL_AUTH", Taint: []string{"WEB_DERIVED", "UNTRUSTED"}, Meta: Meta{Time: t("3"), UID: 1000, Pid: 4242, Session: "s1",
			Path: "MEMORY.md", Op: "write", Verdict: "deny", Rule: "R2", Reason: "tainted writer: WEB_DERIVED"}},
		{Type: TypeQuarantine, Principal: "TOOL_AUTH", Meta: Meta{Time: t("4"), UID: 1000, Session: "s1", Path: "MEMORY.md"}, Payload: &Payload{NewHash: blobB}},
		{Type: TypeWrite, Principal: "USER", Meta: Meta{Time: t("5"), UID: 1000, Path: "SOUL.md", Op: "write", Verdict: "allow", Rule: "R3",
			Reason: "owner édits \u2028 <tag> & \"quotes\""}, Payload: &Payload{OldHash: blobA, NewHash: blobB, Detail: "restore \U0001F600"}},
		{Type: TypeSessionEnd, Principal: "TOOL_AUTH", Meta: Meta{Time: t("6"), UID: 1000, Session: "s1"}},
	}
	parents := [][]int{nil, {0}, {1}, {2}, {3}, nil, {1, 4}}
	for i, r := range rs {
		r.Version = RecordVersion
		r.Taint = append([]string{}, r.Taint...)
		r.Parents = []string{}
		for _, p := range parents[i] {
			r.Parents = append(r.Parents, ids[p])
		}
		id, err := r.ID()
		if err != nil {
			panic(err)
		}
		ids = append(ids, id)
	}
	return rs
}

var vectorBlobs = []string{"I am the agent's soul.\n", "Remember: the user prefers tabs.\n"}

// buildVectorLog appends the vector records to a state dir keyed with the
// committed test key. Ed25519 is deterministic, so the checkpoint bytes
// are reproducible.
func buildVectorLog(t *testing.T, skey, vkey string) string {
	state := t.TempDir()
	if err := initWithKey(evDir(state), skey, vkey); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, state)
	defer l.Close()
	for _, b := range vectorBlobs {
		if _, err := l.PutBlob([]byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range vectorRecords() {
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return state
}

func TestVectors(t *testing.T) {
	if os.Getenv("AERFS_UPDATE_VECTORS") != "" {
		writeVectors(t)
	}
	skey := strings.TrimSpace(readFile(t, filepath.Join(vecDir, "test-key.private")))
	vkey := strings.TrimSpace(readFile(t, filepath.Join(vecDir, "test-key.pub")))

	// 1. record -> canonical bytes -> id.
	var rv []recordVector
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(vecDir, "records.json"))), &rv); err != nil {
		t.Fatal(err)
	}
	if len(rv) != 7 {
		t.Fatalf("%d record vectors", len(rv))
	}
	for i, v := range rv {
		var r Record
		if err := json.Unmarshal(v.Record, &r); err != nil {
			t.Fatal(err)
		}
		c, err := r.Canonical()
		if err != nil || string(c) != v.Canonical {
			t.Fatalf("vector %d: canonical\n got %s\nwant %s (%v)", i, c, v.Canonical, err)
		}
		if IDOf(c) != v.ID {
			t.Fatalf("vector %d: id %s, want %s", i, IDOf(c), v.ID)
		}
		if _, err := ParseRecord([]byte(v.Canonical)); err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
	}

	// 2. the 7-record log -> root -> signed checkpoint.
	root := strings.TrimSpace(readFile(t, filepath.Join(vecDir, "log", "root.txt")))
	var rb rootBuilder
	for _, v := range rv {
		id, _ := hex.DecodeString(v.ID)
		rb.add(leafHash([32]byte(id)))
	}
	if got := rb.root(); hex.EncodeToString(got[:]) != root {
		t.Fatalf("root from leaves %x, want %s", got, root)
	}
	state := buildVectorLog(t, skey, vkey)
	cp := readFile(t, filepath.Join(evDir(state), "checkpoint"))
	if want := readFile(t, filepath.Join(vecDir, "log", "checkpoint")); cp != want {
		t.Fatalf("checkpoint\n got %q\nwant %q", cp, want)
	}
	if want := readFile(t, filepath.Join(vecDir, "log", "records.jsonl")); readFile(t, filepath.Join(evDir(state), "log")) != want {
		t.Fatal("log bytes differ from the vector")
	}
	c, err := OpenCheckpoint([]byte(cp), vkey)
	if err != nil || c.RootHex() != root || c.Size != 7 {
		t.Fatalf("checkpoint %+v %v", c, err)
	}

	// 3. golden bundles that every later version must read.
	for _, name := range []string{"bundle-v1", "bundle-v1-session"} {
		p := filepath.Join(vecDir, name)
		rep, err := VerifyBundle(p, vkey)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rep.Root != root || rep.TreeSize != 7 || rep.KeySource != "argument" {
			t.Fatalf("%s: report %+v", name, rep)
		}
		z := filepath.Join(t.TempDir(), name+".zip")
		zipDir(t, p, z)
		if _, err := VerifyBundle(z, vkey); err != nil {
			t.Fatalf("%s as zip: %v", name, err)
		}
	}
}

func writeVectors(t *testing.T) {
	os.RemoveAll(vecDir)
	os.MkdirAll(filepath.Join(vecDir, "log"), 0o755)
	skey, vkey, err := noteGenerate("test.aerfs/vectors")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(vecDir, "test-key.private"), skey+"\n")
	writeFile(t, filepath.Join(vecDir, "test-key.pub"), vkey+"\n")
	var rv []recordVector
	for _, r := range vectorRecords() {
		c, _ := r.Canonical()
		raw, _ := json.MarshalIndent(r, "    ", "  ")
		rv = append(rv, recordVector{Record: raw, Canonical: string(c), ID: IDOf(c)})
	}
	b, _ := json.MarshalIndent(rv, "", "  ")
	writeFile(t, filepath.Join(vecDir, "records.json"), string(b)+"\n")
	state := buildVectorLog(t, skey, vkey)
	ev := evDir(state)
	writeFile(t, filepath.Join(vecDir, "log", "records.jsonl"), readFile(t, filepath.Join(ev, "log")))
	writeFile(t, filepath.Join(vecDir, "log", "checkpoint"), readFile(t, filepath.Join(ev, "checkpoint")))
	c, _ := peekCheckpoint([]byte(readFile(t, filepath.Join(ev, "checkpoint"))))
	writeFile(t, filepath.Join(vecDir, "log", "root.txt"), c.RootHex()+"\n")
	if _, err := Export(state, Filter{}, filepath.Join(vecDir, "bundle-v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := Export(state, Filter{Type: TypeQuarantine}, filepath.Join(vecDir, "bundle-v1-session")); err != nil {
		t.Fatal(err)
	}
	writeSeeds(t)
}

// writeSeeds writes the committed fuzz corpus from the vectors.
func writeSeeds(t *testing.T) {
	seed := func(fuzz, name string, data []byte) {
		d := filepath.Join("testdata", "fuzz", fuzz)
		os.MkdirAll(d, 0o755)
		writeFile(t, filepath.Join(d, name), fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data))
	}
	for i, line := range lines(readFile(t, filepath.Join(vecDir, "log", "records.jsonl"))) {
		seed("FuzzParseRecord", fmt.Sprintf("vector%d", i), []byte(line))
		var r Record
		json.Unmarshal([]byte(line), &r)
		raw, _ := json.MarshalIndent(r, "", " ")
		seed("FuzzCanonicalRoundTrip", fmt.Sprintf("vector%d", i), raw)
	}
	seed("FuzzParseRecord", "dupkey", []byte(`{"meta":{"time":"2026-01-01T00:00:00Z","uid":0},"parents":[],"principal":"SYS","taint":[],"type":"mount","v":1,"v":1}`))
	seed("FuzzParseRecord", "null", []byte(`{"meta":{"time":"2026-01-01T00:00:00Z","uid":0},"parents":null,"principal":"SYS","taint":[],"type":"mount","v":1}`))
	seed("FuzzParseRecord", "offset_time", []byte(`{"meta":{"time":"2026-01-01T00:00:00+01:00","uid":0},"parents":[],"principal":"SYS","taint":[],"type":"mount","v":1}`))
	for _, b := range []string{"bundle-v1", "bundle-v1-session"} {
		seed("FuzzReadBundle", b, []byte(readFile(t, filepath.Join(vecDir, b, "manifest.json"))))
		z := filepath.Join(t.TempDir(), "b.zip")
		zipDir(t, filepath.Join(vecDir, b), z)
		seed("FuzzZipReader", b, []byte(readFile(t, z)))
	}
	seed("FuzzZipReader", "slip", makeZip(t, []zipEntry{{name: "../evil", data: "x"}}))
	seed("FuzzZipReader", "symlink", makeZip(t, []zipEntry{{name: "blobs/l", mode: os.ModeSymlink | 0o777, data: "/etc/passwd"}}))
	seed("FuzzZipReader", "dup", makeZip(t, []zipEntry{{name: "a", data: "1"}, {name: "a", data: "2"}}))
	var buf bytes.Buffer
	buf.WriteString("PK\x03\x04")
	seed("FuzzZipReader", "truncated", buf.Bytes())
}
