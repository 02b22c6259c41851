package evidence

import (
	"archive/zip"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a state dir with a small provenance DAG and two blobs.
type fixture struct {
	state string
	ids   []string
	blobs []string
	pub   string
}

func buildFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{state: newState(t)}
	l := openLog(t, f.state)
	defer l.Close()
	for _, c := range []string{"old soul\n", "new memory\n"} {
		h, err := l.PutBlob([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		f.blobs = append(f.blobs, h)
	}
	add := func(r *Record) {
		id, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		f.ids = append(f.ids, id)
	}
	add(&Record{Type: TypeMount, Principal: "SYS", Meta: Meta{UID: 0, Reason: "mount"}})
	add(&Record{Type: TypeSessionStart, Principal: "TOOL_AUTH", Parents: []string{f.ids[0]}, Meta: Meta{Session: "s1", UID: 1000}})
	add(&Record{Type: TypeTaint, Principal: "WEB", Taint: []string{"WEB_DERIVED"}, Parents: []string{f.ids[1]}, Meta: Meta{Session: "s1", UID: 1000, Exe: "/usr/bin/curl"}})
	add(&Record{Type: TypeVerdict, Principal: "TOOL_AUTH", Taint: []string{"WEB_DERIVED"}, Parents: []string{f.ids[2]},
		Meta: Meta{Session: "s1", Path: "MEMORY.md", Op: "write", Verdict: "deny", Rule: "R2", UID: 1000, Pid: 4242}})
	add(&Record{Type: TypeQuarantine, Principal: "TOOL_AUTH", Parents: []string{f.ids[3]},
		Meta: Meta{Session: "s1", Path: "MEMORY.md", UID: 1000}, Payload: &Payload{NewHash: f.blobs[1]}})
	add(&Record{Type: TypeWrite, Principal: "USER", Parents: []string{},
		Meta: Meta{Path: "SOUL.md", Op: "write", Verdict: "allow", UID: 1000}, Payload: &Payload{OldHash: f.blobs[0], NewHash: f.blobs[1]}})
	add(&Record{Type: TypeSessionEnd, Principal: "TOOL_AUTH", Parents: []string{f.ids[1], f.ids[4]}, Meta: Meta{Session: "s1", UID: 1000}})
	f.pub = l.PublicKey()
	return f
}

func (f *fixture) export(t testing.TB, flt Filter, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if _, err := Export(f.state, flt, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// copyTree copies a directory of regular files.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// zipDir writes dir's regular files into a zip, sorted, for the zip half
// of each tamper case.
func zipDir(t testing.TB, dir, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// edit rewrites a file with fn, failing if fn changed nothing.
func edit(t testing.TB, p string, fn func(string) string) {
	t.Helper()
	old := readFile(t, p)
	s := fn(old)
	if s == old {
		t.Fatalf("edit of %s changed nothing", p)
	}
	writeFile(t, p, s)
}

func lines(s string) []string   { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
func unlines(l []string) string { return strings.Join(l, "\n") + "\n" }

func flipByteAt(t testing.TB, p string, off int64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// otherKeySign signs body with a fresh key of the same name.
func otherKeySign(t testing.TB, origin string, c Checkpoint) ([]byte, string) {
	t.Helper()
	skey, vkey, err := noteGenerate(origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := noteSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := signCheckpoint(c, s)
	if err != nil {
		t.Fatal(err)
	}
	return b, vkey
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}
