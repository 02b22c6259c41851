package evidence

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
)

// countFiles counts the files and directories under root.
func countFiles(t *testing.T, root string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(root, func(_ string, _ fs.DirEntry, err error) error {
		if err == nil {
			n++
		}
		return nil
	})
	return n
}

// A stream of guarded commits (a new small version each, and its record)
// creates no file per commit in the state directory: the versions go into
// one pack. A file per version slows every later creation on a file
// system that keeps recently freed inodes aside (ext4), and fills the
// state directory with inodes.
func TestCommitsCreateNoFilePerVersion(t *testing.T) {
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	before := countFiles(t, evDir(d))
	const commits = 100
	prev := ""
	for i := 0; i < commits; i++ {
		h, err := l.PutBlob([]byte(fmt.Sprintf("- version %d of MEMORY.md\n", i)))
		if err != nil {
			t.Fatal(err)
		}
		r := sampleRecord(i)
		r.Type, r.Payload = TypeWrite, &Payload{OldHash: prev, NewHash: h}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		prev = h
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if grew := countFiles(t, evDir(d)) - before; grew > 4 {
		t.Fatalf("%d commits added %d files and directories to the state directory", commits, grew)
	}
	if _, err := VerifyState(d, ""); err != nil {
		t.Fatal(err)
	}
}
