package integration

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawLog is `aerfs log --json` decoded loosely, so that fields a record
// format version may add are seen as they are.
func rawLog(t *testing.T, e *Env) []map[string]any {
	t.Helper()
	r := e.Aerfs("log", "--json", "--state", e.State, "--workspace", e.WS)
	if r.Code != 0 {
		t.Fatalf("aerfs log: %s", r)
	}
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.Stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func field(m map[string]any, keys ...string) string {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[k]
	}
	s, _ := v.(string)
	return s
}

// TestNonUTF8GuardedName: a guarded name that is not UTF-8
// (memory/\xff.md, under the memory class) is committed for the owner,
// recorded losslessly, and goes through log, history, restore and
// export/verify; a WEB session's refused write to it is recorded with its
// rule.
func TestNonUTF8GuardedName(t *testing.T) {
	e := newEnv(t, map[string]string{"memory/notes.md": "plain\n"}).Mount()
	name := "memory/\xff.md"
	b64 := base64.StdEncoding.EncodeToString([]byte(name))
	p := filepath.Join(e.WS, name)

	if err := os.WriteFile(p, []byte("v1\n"), 0o644); err != nil {
		t.Fatalf("owner write of a non-UTF-8 guarded name: %v", err)
	}
	if err := os.WriteFile(p, []byte("v2\n"), 0o644); err != nil {
		t.Fatalf("owner rewrite: %v", err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "v2\n" {
		t.Fatalf("content after owner writes: %q %v", b, err)
	}

	r := e.Sh("WEB", "", `printf evil > "$(printf 'memory/\377.md')"`)
	expectFail(t, "WEB write to a non-UTF-8 guarded name", r)
	if b, _ := os.ReadFile(p); string(b) != "v2\n" {
		t.Fatalf("WEB write changed the file: %q", b)
	}

	// A refused create of a new such name leaves nothing behind.
	expectFail(t, "WEB create of a new non-UTF-8 guarded name", e.Sh("WEB", "", `printf evil > "$(printf 'memory/\376.md')"`))
	if _, err := os.Lstat(filepath.Join(e.WS, "memory/\xfe.md")); err == nil {
		t.Errorf("a refused create left memory/\\xfe.md behind")
	}

	var writes, denials int
	for _, le := range rawLog(t, e) {
		if field(le, "record", "meta", "path_b64") != b64 {
			continue
		}
		if field(le, "record", "meta", "path") != "" {
			t.Errorf("record %v carries both path and path_b64", le["idx"])
		}
		switch {
		case field(le, "record", "type") == "write":
			writes++
		case field(le, "record", "meta", "verdict") == "deny" && field(le, "record", "meta", "rule") != "":
			denials++
		}
	}
	if writes < 2 || denials < 1 {
		t.Fatalf("log has %d writes and %d rule-carrying denials under path_b64 %s; want ≥2 and ≥1\n%s", writes, denials, b64,
			e.Aerfs("log", "--state", e.State, "--workspace", e.WS).Stdout)
	}

	h := e.Aerfs("history", "--json", p)
	if h.Code != 0 {
		t.Fatalf("history: %s", h)
	}
	var vers []map[string]any
	if err := json.Unmarshal([]byte(h.Stdout), &vers); err != nil || len(vers) < 2 {
		t.Fatalf("history of %q: %v %s", name, err, h.Stdout)
	}
	expectOK(t, "restore to version 1", e.Aerfs("restore", p, "--to", "1"))
	if b, _ := os.ReadFile(p); string(b) != "v1\n" {
		t.Fatalf("after restore --to 1: %q\nhistory: %s", b, h.Stdout)
	}

	out := filepath.Join(t.TempDir(), "bundle")
	expectOK(t, "export", e.Aerfs("export", "-o", out, "--state", e.State, "--workspace", e.WS))
	key := strings.TrimSpace(e.Aerfs("key", "--state", e.State).Stdout)
	expectOK(t, "verify bundle", e.Aerfs("verify", "--key", key, out))
	expectOK(t, "verify --state", e.Aerfs("verify", "--state", e.State, "--workspace", e.WS))
	pout := filepath.Join(t.TempDir(), "pbundle")
	expectOK(t, "export --path", e.Aerfs("export", "-o", pout, "--path", name, "--state", e.State, "--workspace", e.WS))
	expectOK(t, "verify the --path bundle", e.Aerfs("verify", "--key", key, pout))
	if b, err := os.ReadFile(filepath.Join(pout, "records.jsonl")); err != nil || !strings.Contains(string(b), b64) {
		t.Errorf("export --path of the non-UTF-8 name holds none of its records")
	}
}

// TestVerifyStateLargeSnapshot: a snapshot of 50 guarded files makes a
// record over 4 KiB; verify --state reads it.
func TestVerifyStateLargeSnapshot(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 50; i++ {
		files[fmt.Sprintf("memory/note-%02d.md", i)] = fmt.Sprintf("note %d\n", i)
	}
	e := newEnv(t, files).Mount()
	var script strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&script, "echo v2-%d >> memory/note-%02d.md\n", i, i)
	}
	expectOK(t, "owner writes", e.Owner(script.String()))
	expectOK(t, "snapshot", e.Aerfs("snapshot"))
	r := e.Aerfs("verify", "--state", e.State, "--workspace", e.WS)
	if r.Code != 0 || strings.Contains(r.Stderr, "panic") {
		t.Fatalf("verify --state on a log with a 50-file snapshot: %s", r)
	}
	big := 0
	for _, le := range rawLog(t, e) {
		if b, _ := json.Marshal(le["record"]); len(b) > big {
			big = len(b)
		}
	}
	if big <= 4096 {
		t.Fatalf("largest record is %d bytes; the test needs one over 4 KiB", big)
	}
	t.Logf("%s (largest record %d bytes)", strings.TrimSpace(r.Stdout), big)
}

// TestVerifyFIFOCLI: aerfs verify on a FIFO answers at once with an
// aerfs: error.
func TestVerifyFIFOCLI(t *testing.T) {
	d := t.TempDir()
	for _, n := range []string{"fifo", "fifo.zip"} {
		p := filepath.Join(d, n)
		if r := runCmd(d, nil, "mkfifo", p); r.Code != 0 {
			t.Fatal(r)
		}
		r := runT(d, nil, aerfsBin, "verify", p)
		if r.Code == 0 || !strings.Contains(r.Stderr, "aerfs:") || !strings.Contains(r.Stderr, "not a regular file") {
			t.Errorf("verify %s: %s", n, r)
		}
	}
}

// TestPolicyCheckHugeFile: aerfs policy check refuses a 50 MB policy from
// its size, and a FIFO at once, with an aerfs: error.
func TestPolicyCheckHugeFile(t *testing.T) {
	d := t.TempDir()
	big := filepath.Join(d, "policy.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := runT(d, nil, aerfsBin, "policy", "check", big)
	if r.Code == 0 || !strings.Contains(r.Stderr, "aerfs:") || !strings.Contains(r.Stderr, "52428800 bytes") {
		t.Errorf("policy check of a 50 MB file: %s", r)
	}
	fifo := filepath.Join(d, "fifo.yaml")
	if r := runCmd(d, nil, "mkfifo", fifo); r.Code != 0 {
		t.Fatal(r)
	}
	r = runT(d, nil, aerfsBin, "policy", "check", fifo)
	if r.Code == 0 || !strings.Contains(r.Stderr, "not a regular file") {
		t.Errorf("policy check of a FIFO: %s", r)
	}
}
