package fs

import (
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/internal/calltrace"
)

// noFlow lists the FUSE operations of aerfs's nodes and handles that move
// no content, each with the reason. Every other operation must reach the
// one label-flow function, guard/flow.(*Flow).Next (TestEveryOperationFlows):
// a go-fuse upgrade or a new handle that adds an operation cannot bypass
// the label rules without this test failing.
var noFlow = map[string]string{
	"Node.WrapChild":         "go-fuse's own bookkeeping of a new node",
	"Node.Getattr":           "attributes, no content",
	"Node.Statx":             "answered ENOSYS",
	"Node.Tmpfile":           "refused: an unnamed file would escape every handle",
	"Node.Unlink":            "a name goes; the content moves nowhere (decided and recorded by the gate and the transaction)",
	"Node.Rmdir":             "an empty directory goes",
	"Node.CopyFileRange":     "the copier opened the source to read it (its label flowed into the copier) and the destination to write it (the label flows at that handle's close or commit)",
	"stagedFile.Read":        "the writer reads its own draft; a page fill reads the committed version through the node",
	"stagedFile.Write":       "staged in the draft: the label flows at commit (Flush, Fsync, Release)",
	"stagedFile.Allocate":    "staged in the draft: the label flows at commit",
	"stagedFile.Lseek":       "a position",
	"stagedFile.Getattr":     "attributes",
	"stagedFile.Setattr":     "the size is staged in the draft: the label flows at commit",
	"guardedReader.Release":  "a reader's handle goes",
	"guardedReader.Getattr":  "attributes",
	"guardedReader.Lseek":    "a position",
	"guardedReader.Flush":    "drops the page cache of a guarded file",
	"objectDir.Readdirent":   "names of a directory the caller opened through the gate",
	"objectDir.Seekdir":      "a position",
	"objectDir.Releasedir":   "a listing ends",
	"objectDir.Fsyncdir":     "flushes a directory",
	"objectDir.Ioctl":        "a directory's ioctl (FS_IOC_GETFLAGS …)",
	"filteredDir.Readdirent": "names of the sessions root, filtered by the gate",
	"filteredDir.Seekdir":    "a position",
	"filteredDir.Releasedir": "a listing ends",
	"filteredDir.Fsyncdir":   "flushes a directory",
}

// handles are the types whose methods serve FUSE requests: the node and
// the file handles it hands out (.aerfs's virtual nodes serve no
// workspace content and are left out).
var handles = []string{"Node", "stagedFile", "plainFile", "guardedReader", "objectDir", "filteredDir"}

// TestEveryOperationFlows fails when an operation of aerfs's nodes and
// handles neither reaches the one label-flow function nor is listed in
// noFlow with the reason it moves no content.
func TestEveryOperationFlows(t *testing.T) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/hanwen/go-fuse/v2").Output()
	if err != nil {
		t.Fatalf("go list go-fuse: %v", err)
	}
	ops := map[string]bool{}
	for _, prefix := range []string{"Node", "File"} {
		for _, ms := range fuseInterfaces(t, filepath.Join(strings.TrimSpace(string(dir)), "fs", "api.go"), prefix) {
			for _, m := range ms {
				ops[m] = true
			}
		}
	}
	p, err := calltrace.Load("..", "./fs", "./guard/...")
	if err != nil {
		t.Fatal(err)
	}
	next := p.Lookup("guard/flow.(*Flow).Next")
	if next == nil {
		t.Fatal("guard/flow.(*Flow).Next not found")
	}
	var missing []string
	flows := 0
	for _, typ := range handles {
		ms := p.Methods("fs", typ)
		names := make([]string, 0, len(ms))
		for name := range ms {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if !ops[name] {
				continue // a helper, not a FUSE operation
			}
			key := typ + "." + name
			chain := p.Reaches(ms[name], next)
			_, listed := noFlow[key]
			switch {
			case chain != nil && listed:
				t.Errorf("%s reaches the label flow but is listed in noFlow: take it out", key)
			case chain == nil && !listed:
				missing = append(missing, key)
			case chain != nil:
				flows++
				t.Logf("%s: %s", key, strings.Join(chain, " → "))
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("these operations move content without the label flow (guard/flow.Next): %s\n"+
			"let them reach it, or list them in noFlow with the reason they move no content", strings.Join(missing, ", "))
	}
	if flows < 10 {
		t.Fatalf("only %d operations reach the label flow: the test no longer sees them", flows)
	}
	for key := range noFlow {
		typ, name, _ := strings.Cut(key, ".")
		if _, ok := p.Methods("fs", typ)[name]; !ok {
			t.Errorf("noFlow lists %s, which aerfs no longer has", key)
		}
	}
}
