package evidence

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

type tamperCase struct {
	name    string
	partial bool // use the filtered (proof-carrying) bundle
	mutate  func(t *testing.T, f *fixture, dir string)
	pubkey  func(f *fixture) string // default: the fixture's key
	kind    Kind
	msg     string // substring of the error
}

func bundleTamperCases() []tamperCase {
	rec := func(dir string) string { return filepath.Join(dir, "records.jsonl") }
	idx := func(dir string) string { return filepath.Join(dir, "index.jsonl") }
	man := func(dir string) string { return filepath.Join(dir, "manifest.json") }
	cpf := func(dir string) string { return filepath.Join(dir, "checkpoint") }
	swapLines := func(t *testing.T, p string, i, j int) {
		l := lines(readFile(t, p))
		l[i], l[j] = l[j], l[i]
		writeFile(t, p, unlines(l))
	}
	return []tamperCase{
		{name: "record byte flip (still valid JSON)", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, rec(d), func(s string) string { return strings.Replace(s, `"MEMORY.md"`, `"MEMORY.mD"`, 1) })
		}, kind: KindIntegrity, msg: "record 3: id mismatch"},
		{name: "record byte flip (breaks JSON)", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, rec(d), func(s string) string { return "[" + s[1:] })
		}, kind: KindSchema, msg: "record 0:"},
		{name: "record unknown field", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, rec(d), func(s string) string { return strings.Replace(s, `{"meta"`, `{"extra":1,"meta"`, 1) })
		}, kind: KindSchema, msg: `record 0: unknown field "extra"`},
		{name: "record duplicate key", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, rec(d), func(s string) string { return strings.Replace(s, `{"meta"`, `{"v":1,"meta"`, 1) })
		}, kind: KindSchema, msg: `record 0: duplicate key "v"`},
		{name: "record non-UTC time", mutate: func(t *testing.T, f *fixture, d string) {
			l := lines(readFile(t, rec(d)))
			var r Record
			json.Unmarshal([]byte(l[0]), &r)
			l[0] = strings.Replace(l[0], r.Meta.Time, strings.TrimSuffix(r.Meta.Time, "Z")+"+00:00", 1)
			writeFile(t, rec(d), unlines(l))
		}, kind: KindSchema, msg: "record 0: meta.time"},
		{name: "blob byte flip", mutate: func(t *testing.T, f *fixture, d string) {
			flipByteAt(t, filepath.Join(d, "blobs", f.blobs[0]), 0)
		}, kind: KindIntegrity, msg: "hash mismatch"},
		{name: "blob replaced (renamed to its new hash)", mutate: func(t *testing.T, f *fixture, d string) {
			os.Remove(filepath.Join(d, "blobs", f.blobs[0]))
			writeFile(t, filepath.Join(d, "blobs", sha256Hex([]byte("evil"))), "evil")
		}, kind: KindIntegrity, msg: "not referenced by any record"},
		{name: "blob deleted", mutate: func(t *testing.T, f *fixture, d string) {
			os.Remove(filepath.Join(d, "blobs", f.blobs[0]))
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"blob_count": 2`, `"blob_count": 1`, 1) })
		}, kind: KindIntegrity, msg: ": missing (referenced by record 5)"},
		{name: "proof byte flip", partial: true, mutate: func(t *testing.T, f *fixture, d string) {
			l := lines(readFile(t, idx(d)))
			i := strings.Index(l[0], `"proof":["`) + len(`"proof":["`)
			c := byte('0')
			if l[0][i] == '0' {
				c = '1'
			}
			l[0] = l[0][:i] + string(c) + l[0][i+1:]
			writeFile(t, idx(d), unlines(l))
		}, kind: KindIntegrity, msg: "inclusion proof does not match checkpoint"},
		{name: "proof bad hex", partial: true, mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, idx(d), func(s string) string { return strings.Replace(s, `"proof":["`, `"proof":["g`, 1) })
		}, kind: KindSchema, msg: "not lowercase hex"},
		{name: "ref proof flip", partial: true, mutate: func(t *testing.T, f *fixture, d string) {
			p := filepath.Join(d, "refs.jsonl")
			edit(t, p, func(s string) string {
				i := strings.Index(s, `"proof":["`) + len(`"proof":["`)
				c := "0"
				if s[i] == '0' {
					c = "1"
				}
				return s[:i] + c + s[i+1:]
			})
		}, kind: KindIntegrity, msg: "ref: record"},
		{name: "manifest root flip", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, man(d), func(s string) string {
				i := strings.Index(s, `"root_hash": "`) + len(`"root_hash": "`)
				c := "0"
				if s[i] == '0' {
					c = "1"
				}
				return s[:i] + c + s[i+1:]
			})
		}, kind: KindIntegrity, msg: "manifest: root_hash does not match checkpoint"},
		{name: "manifest count changed", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"record_count": 7`, `"record_count": 8`, 1) })
		}, kind: KindIntegrity, msg: "manifest says 8"},
		{name: "manifest unknown field", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, man(d), func(s string) string { return strings.Replace(s, "{", `{"extra": true,`, 1) })
		}, kind: KindSchema, msg: `manifest: unknown field "extra"`},
		{name: "manifest wrong type", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"tree_size": 7`, `"tree_size": "7"`, 1) })
		}, kind: KindSchema, msg: "manifest: field tree_size: wrong type"},
		{name: "manifest missing member", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"ref_count": 0,`, ``, 1) })
		}, kind: KindSchema, msg: "manifest: missing required field ref_count"},
		{name: "index line missing idx", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, idx(d), func(s string) string { return strings.Replace(s, `{"idx":0,`, `{`, 1) })
		}, kind: KindSchema, msg: "index.jsonl line 1: missing required field idx"},
		{name: "manifest future version", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"version": 1`, `"version": 2`, 1) })
		}, kind: KindSchema, msg: "unsupported bundle version 2"},
		{name: "checkpoint signature flip", mutate: func(t *testing.T, f *fixture, d string) {
			flipByteAt(t, cpf(d), -5)
		}, kind: KindSignature, msg: "checkpoint:"},
		{name: "checkpoint body flip", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, cpf(d), func(s string) string { return strings.Replace(s, "\n7\n", "\n8\n", 1) })
		}, kind: KindSignature, msg: "checkpoint: invalid signature"},
		{name: "re-signed with another key", mutate: func(t *testing.T, f *fixture, d string) {
			c, _ := peekCheckpoint([]byte(readFile(t, cpf(d))))
			b, _ := otherKeySign(t, c.Origin, c)
			writeFile(t, cpf(d), string(b))
		}, kind: KindSignature, msg: "checkpoint: signature by unknown key"},
		{name: "re-signed, manifest key replaced too", mutate: func(t *testing.T, f *fixture, d string) {
			c, _ := peekCheckpoint([]byte(readFile(t, cpf(d))))
			b, vkey := otherKeySign(t, c.Origin, c)
			writeFile(t, cpf(d), string(b))
			var m map[string]any
			json.Unmarshal([]byte(readFile(t, man(d))), &m)
			m["public_key"] = vkey
			m["key_id"], _ = keyID(vkey)
			mb, _ := json.Marshal(m)
			writeFile(t, man(d), string(mb))
		}, kind: KindSignature, msg: "checkpoint: signature by unknown key"},
		{name: "record deleted", mutate: func(t *testing.T, f *fixture, d string) {
			for _, p := range []string{rec(d), idx(d)} {
				l := lines(readFile(t, p))
				writeFile(t, p, unlines(append(l[:2:2], l[3:]...)))
			}
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"record_count": 7`, `"record_count": 6`, 1) })
		}, kind: KindIntegrity, msg: "complete bundle has 6 records"},
		{name: "record deleted (partial bundle)", partial: true, mutate: func(t *testing.T, f *fixture, d string) {
			for _, p := range []string{rec(d), idx(d)} {
				l := lines(readFile(t, p))
				writeFile(t, p, unlines(l[1:]))
			}
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"record_count": 5`, `"record_count": 4`, 1) })
		}, kind: KindIntegrity, msg: "neither in the bundle nor proven"},
		{name: "record inserted", mutate: func(t *testing.T, f *fixture, d string) {
			r := &Record{Version: 1, Type: TypeVerdict, Principal: "USER", Taint: []string{}, Parents: []string{}, Meta: Meta{Time: "2026-01-01T00:00:00Z"}}
			c, _ := r.Canonical()
			ln, _ := json.Marshal(indexLine{Idx: 7, ID: IDOf(c), Proof: []string{}})
			writeFile(t, rec(d), readFile(t, rec(d))+string(c)+"\n")
			writeFile(t, idx(d), readFile(t, idx(d))+string(ln)+"\n")
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"record_count": 7`, `"record_count": 8`, 1) })
		}, kind: KindIntegrity, msg: "complete bundle has 8 records"},
		{name: "record duplicated", mutate: func(t *testing.T, f *fixture, d string) {
			for _, p := range []string{rec(d), idx(d)} {
				l := lines(readFile(t, p))
				writeFile(t, p, unlines(append(l[:3:3], l[2:]...)))
			}
		}, kind: KindIntegrity, msg: "records.jsonl: 8 records, manifest says 7"},
		{name: "record duplicated, counts fixed", mutate: func(t *testing.T, f *fixture, d string) {
			for _, p := range []string{rec(d), idx(d)} {
				l := lines(readFile(t, p))
				writeFile(t, p, unlines(append(l[:3:3], l[2:]...)))
			}
			edit(t, man(d), func(s string) string { return strings.Replace(s, `"record_count": 7`, `"record_count": 8`, 1) })
		}, kind: KindIntegrity, msg: "complete bundle has 8 records, tree has 7"},
		{name: "records reordered", mutate: func(t *testing.T, f *fixture, d string) {
			swapLines(t, rec(d), 1, 2)
			swapLines(t, idx(d), 1, 2)
		}, kind: KindIntegrity, msg: "record 2: complete bundle skips record 1"},
		{name: "records reordered, index kept", mutate: func(t *testing.T, f *fixture, d string) {
			swapLines(t, rec(d), 1, 2)
		}, kind: KindIntegrity, msg: "record 1: id mismatch"},
		{name: "records truncated mid-record", mutate: func(t *testing.T, f *fixture, d string) {
			s := readFile(t, rec(d))
			writeFile(t, rec(d), s[:len(s)-20])
		}, kind: KindIntegrity, msg: "records.jsonl: truncated"},
		{name: "unexpected file", mutate: func(t *testing.T, f *fixture, d string) {
			writeFile(t, filepath.Join(d, "notes.txt"), "hi")
		}, kind: KindSchema, msg: "bundle: unexpected file notes.txt"},
		{name: "wrong trusted key", pubkey: func(f *fixture) string {
			_, vkey, _ := noteGenerate("test.aerfs/log")
			return vkey
		}, kind: KindSignature, msg: "checkpoint: signature by unknown key"},
	}
}

func TestTamperBundle(t *testing.T) {
	f := buildFixture(t)
	full := f.export(t, Filter{}, "full")
	// Partial: session s1 minus the first session record, so parents
	// outside the selection are proven by refs.
	part := f.export(t, Filter{Session: "s1"}, "part")
	for _, pristine := range []string{full, part} {
		if _, err := VerifyBundle(pristine, f.pub); err != nil {
			t.Fatalf("pristine %s: %v", pristine, err)
		}
		z := pristine + ".zip"
		zipDir(t, pristine, z)
		if _, err := VerifyBundle(z, f.pub); err != nil {
			t.Fatalf("pristine zip %s: %v", z, err)
		}
	}
	for _, tc := range bundleTamperCases() {
		for _, asZip := range []bool{false, true} {
			name := tc.name + map[bool]string{false: " (dir)", true: " (zip)"}[asZip]
			t.Run(name, func(t *testing.T) {
				src := full
				if tc.partial {
					src = part
				}
				d := filepath.Join(t.TempDir(), "b")
				copyTree(t, src, d)
				if tc.mutate != nil {
					tc.mutate(t, f, d)
				}
				target := d
				if asZip {
					target = d + ".zip"
					zipDir(t, d, target)
				}
				pub := f.pub
				if tc.pubkey != nil {
					pub = tc.pubkey(f)
				}
				_, err := VerifyBundle(target, pub)
				checkKind(t, err, tc.kind, tc.msg)
			})
		}
	}
}

func checkKind(t *testing.T, err error, kind Kind, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("tampering not detected (want %v %q)", kind, msg)
	}
	ve, ok := err.(*VerifyError)
	if !ok {
		t.Fatalf("error %T %v is not a *VerifyError", err, err)
	}
	if ve.Kind != kind || !strings.Contains(ve.What, msg) {
		t.Fatalf("got %v %q, want %v containing %q", ve.Kind, ve.What, kind, msg)
	}
}

func TestTamperState(t *testing.T) {
	ev := func(d, n string) string { return filepath.Join(d, "evidence", n) }
	recordOffset := func(t *testing.T, d string, i int) int64 {
		rd, err := openReader(d)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		s, _, _, err := readEntry(rd.index, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []tamperCase{
		{name: "record byte flip", mutate: func(t *testing.T, f *fixture, d string) {
			edit(t, ev(d, "log"), func(s string) string { return strings.Replace(s, `"MEMORY.md"`, `"MEMORY.mD"`, 1) })
		}, kind: KindIntegrity, msg: "record 3: id mismatch"},
		{name: "record byte flip (breaks JSON)", mutate: func(t *testing.T, f *fixture, d string) {
			flipByteAt(t, ev(d, "log"), recordOffset(t, d, 2))
		}, kind: KindSchema, msg: "record 2:"},
		{name: "blob byte flip", mutate: func(t *testing.T, f *fixture, d string) {
			damageBlob(t, ev(d, ""), f.blobs[1], func(p string, off, _ int64) { flipByteAt(t, p, off) })
		}, kind: KindIntegrity, msg: ": hash mismatch"},
		{name: "blob deleted", mutate: func(t *testing.T, f *fixture, d string) {
			loseBlob(t, ev(d, ""), f.blobs[0])
		}, kind: KindIntegrity, msg: "missing (referenced by record 5)"},
		{name: "stored hash flip", mutate: func(t *testing.T, f *fixture, d string) {
			flipByteAt(t, ev(d, "hashes"), 0)
		}, kind: KindIntegrity, msg: "record 0: stored hash mismatch"},
		{name: "interior stored hash flip", mutate: func(t *testing.T, f *fixture, d string) {
			flipByteAt(t, ev(d, "hashes"), tlog.StoredHashIndex(2, 0)*32) // the node over records 0..3
		}, kind: KindIntegrity, msg: "hashes: stored tree hashes"},
		{name: "index id flip", mutate: func(t *testing.T, f *fixture, d string) {
			flipByteAt(t, ev(d, "index"), 40*4+8)
		}, kind: KindIntegrity, msg: "record 4: id mismatch"},
		{name: "checkpoint flip", mutate: func(t *testing.T, f *fixture, d string) {
			flipByteAt(t, ev(d, "checkpoint"), -5)
		}, kind: KindSignature, msg: "checkpoint:"},
		{name: "re-signed with another key", mutate: func(t *testing.T, f *fixture, d string) {
			c, _ := peekCheckpoint([]byte(readFile(t, ev(d, "checkpoint"))))
			b, _ := otherKeySign(t, c.Origin, c)
			writeFile(t, ev(d, "checkpoint"), string(b))
		}, kind: KindSignature, msg: "checkpoint: signature by unknown key"},
		{name: "record deleted", mutate: func(t *testing.T, f *fixture, d string) {
			l := lines(readFile(t, ev(d, "log")))
			writeFile(t, ev(d, "log"), unlines(append(l[:2:2], l[3:]...)))
		}, kind: KindIntegrity, msg: "record 2:"},
		{name: "record inserted", mutate: func(t *testing.T, f *fixture, d string) {
			l := lines(readFile(t, ev(d, "log")))
			writeFile(t, ev(d, "log"), unlines(append(l[:2:2], append([]string{l[0]}, l[2:]...)...)))
		}, kind: KindIntegrity, msg: "record 2:"},
		{name: "record duplicated", mutate: func(t *testing.T, f *fixture, d string) {
			l := lines(readFile(t, ev(d, "log")))
			writeFile(t, ev(d, "log"), unlines(append(l[:3:3], l[2:]...)))
		}, kind: KindIntegrity, msg: "record 3:"},
		{name: "records reordered", mutate: func(t *testing.T, f *fixture, d string) {
			l := lines(readFile(t, ev(d, "log")))
			l[5], l[6] = l[6], l[5]
			writeFile(t, ev(d, "log"), unlines(l))
		}, kind: KindIntegrity, msg: "record 5:"},
		{name: "log truncated mid-record below checkpoint", mutate: func(t *testing.T, f *fixture, d string) {
			os.Truncate(ev(d, "log"), recordOffset(t, d, 4)+10)
		}, kind: KindIntegrity, msg: "record 4: truncated"},
		{name: "index truncated", mutate: func(t *testing.T, f *fixture, d string) {
			os.Truncate(ev(d, "index"), 40*5+3)
		}, kind: KindIntegrity, msg: "index: truncated"},
		{name: "unknown field in record", mutate: func(t *testing.T, f *fixture, d string) {
			// Same length, so offsets still line up: "v":1 -> "w":1.
			edit(t, ev(d, "log"), func(s string) string { return strings.Replace(s, `,"v":1}`, `,"w":1}`, 1) })
		}, kind: KindSchema, msg: `record 0: unknown field "w"`},
	}
	f := buildFixture(t)
	if _, err := VerifyState(f.state, f.pub); err != nil {
		t.Fatalf("pristine: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "state")
			copyTree(t, f.state, d)
			tc.mutate(t, f, d)
			_, err := VerifyState(d, f.pub)
			checkKind(t, err, tc.kind, tc.msg)
		})
	}
}
