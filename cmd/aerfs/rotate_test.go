package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// The daemon log rotates at its size limit into name.1 … name.keep, never
// splits a line, drops the oldest file, and every line in every file is
// JSON.
func TestRotatingLog(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "daemon.log")
	r, err := openRotating(name, 4096, 3)
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(r).With().Timestamp().Logger()
	for i := 0; i < 1000; i++ {
		log.Info().Int("n", i).Str("pad", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx").Msg("line")
	}
	r.Close()
	seen := map[int]bool{}
	for _, f := range []string{name, name + ".1", name + ".2", name + ".3"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if fi.Size() > 4096 {
			t.Errorf("%s is %d bytes, past the 4096 limit", f, fi.Size())
		}
		fh, _ := os.Open(f)
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var v struct{ N int }
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatalf("%s: not a JSON line: %q", f, sc.Text())
			}
			seen[v.N] = true
		}
		fh.Close()
	}
	if _, err := os.Stat(name + ".4"); err == nil {
		t.Errorf("kept more than 3 rotated files")
	}
	// The newest lines are all there, without a gap.
	for i := 999; i > 999-40; i-- {
		if !seen[i] {
			t.Fatalf("line %d lost", i)
		}
	}
	if seen[0] {
		t.Errorf("the oldest lines should have been dropped with the oldest file")
	}
}
