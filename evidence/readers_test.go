package evidence

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLargeRecordVerifies writes a record close to MaxRecordSize through
// the evidence API and verifies the live log and an exported bundle.
func TestLargeRecordVerifies(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	if _, err := l.Append(sampleRecord(0)); err != nil {
		t.Fatal(err)
	}
	big := &Record{Type: TypeVerdict, Principal: "USER", Meta: Meta{Path: "MEMORY.md", Op: "write", Verdict: "allow",
		Reason: strings.Repeat("x", MaxRecordSize-4096)}}
	if _, err := l.Append(big); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(sampleRecord(2)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	rep, err := VerifyState(dir, "")
	if err != nil {
		t.Fatalf("VerifyState: %v", err)
	}
	if rep.Records != 3 || rep.Bytes < MaxRecordSize-4096 {
		t.Fatalf("report: %+v", rep)
	}
	for _, name := range []string{"b", "b.zip"} {
		out := filepath.Join(t.TempDir(), name)
		if _, err := Export(dir, Filter{}, out); err != nil {
			t.Fatal(err)
		}
		if rep, err := VerifyBundle(out, ""); err != nil || rep.Records != 3 {
			t.Fatalf("VerifyBundle %s: %v %+v", name, err, rep)
		}
	}
}

// TestVerifyRefusesFIFO: a FIFO given as a bundle, or inside one, is
// refused at once instead of waiting for a writer.
func TestVerifyRefusesFIFO(t *testing.T) {
	d := t.TempDir()
	f := buildFixture(t)
	bundle := f.export(t, Filter{}, "b")
	cases := map[string]string{
		"fifo":       filepath.Join(d, "fifo"),
		"fifo.zip":   filepath.Join(d, "fifo.zip"),
		"in-bundle":  filepath.Join(bundle, "zz-fifo"),
		"dev":        "/dev/null",
		"dev-as-zip": "",
	}
	for _, p := range []string{cases["fifo"], cases["fifo.zip"], cases["in-bundle"]} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	zipLink := filepath.Join(d, "null.zip")
	if err := os.Symlink("/dev/null", zipLink); err != nil {
		t.Fatal(err)
	}
	cases["dev-as-zip"] = zipLink
	for name, p := range cases {
		done := make(chan error, 1)
		go func() { _, err := VerifyBundle(p, ""); done <- err }()
		select {
		case err := <-done:
			if err == nil || KindOf(err) != KindIO {
				t.Errorf("%s: want an I/O refusal, got %v", name, err)
			} else if !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: error does not say why: %v", name, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: VerifyBundle blocked", name)
		}
	}
}
