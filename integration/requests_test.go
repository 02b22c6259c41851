package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What the kernel answers from its caches and what it must ask the daemon,
// checked by counting the FUSE requests the daemon receives (`aerfs mount
// --debug` logs each one). These requests are what the benchmark's metadata
// rows are made of (docs/performance.md, "Where metadata time goes"); the
// tests count them, they never time them.

// rxLine is go-fuse's log line of a request. Its first quoted string is
// the name a request carries: the entry of a LOOKUP (`LOOKUP n1 ["a.txt"]`),
// the attribute of a GETXATTR (`GETXATTR n5 {sz 255} "security.selinux"`).
var rxLine = regexp.MustCompile(`(rx \d+: ([A-Z_0-9]+)[^"]*(?:"([^"]*)")?.*)`)

// requests is what the daemon received while one command ran.
type requests struct {
	op    map[string]int // by opcode
	named map[string]int // "OPCODE name" for requests that carry a name
	lines []string
}

func (r requests) total() int {
	n := 0
	for _, c := range r.op {
		n += c
	}
	return n
}

func (r requests) String() string {
	return fmt.Sprintf("%d requests %v\n%s", r.total(), r.op, strings.Join(r.lines, "\n"))
}

// requestsDuring runs f and returns the requests the daemon logged
// meanwhile. The mount must have been made with --debug.
func (e *Env) requestsDuring(f func()) requests {
	e.t.Helper()
	// go-fuse's request log is plain text on the daemon's stderr.
	logp := filepath.Join(e.State, "daemon.stderr")
	// Requests the kernel sends asynchronously (RELEASE, FORGET) after an
	// earlier command must not be counted against this one.
	time.Sleep(300 * time.Millisecond)
	st, err := os.Stat(logp)
	if err != nil {
		e.t.Fatal(err)
	}
	f()
	time.Sleep(300 * time.Millisecond)
	b, err := os.ReadFile(logp)
	if err != nil {
		e.t.Fatal(err)
	}
	r := requests{op: map[string]int{}, named: map[string]int{}}
	for _, line := range strings.Split(string(b[st.Size():]), "\n") {
		m := rxLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r.op[m[2]]++
		r.lines = append(r.lines, m[1])
		name := m[3]
		if name != "" {
			r.named[m[2]+" "+name]++
		}
	}
	return r
}

// A plain file's entry and attributes are served by the kernel for the
// plain timeout; a guarded file's for a second only (fs/attrcache.go):
// after that every stat of MEMORY.md reaches the daemon again.
func TestKernelCachesPlainEntriesGuardedForASecond(t *testing.T) {
	e := newEnv(t, map[string]string{"notes.txt": "n\n", "MEMORY.md": "m\n"}).Mount("--debug")
	expectOK(t, "warm up", e.Owner("stat notes.txt MEMORY.md >/dev/null"))

	var r Result
	plain := e.requestsDuring(func() { r = e.Owner("for i in 1 2 3 4 5 6 7 8 9 10; do stat -c %s notes.txt; done") })
	expectOK(t, "stat plain", r)
	if n := plain.named["LOOKUP notes.txt"] + plain.op["GETATTR"] + plain.op["STATX"]; n > 2 {
		t.Errorf("10 stats of a plain file sent %d lookups/getattrs, want the kernel to answer them:\n%s", n, plain)
	}

	// Ten stats 0.3 s apart span three seconds: the kernel asks at least
	// once a second.
	guarded := e.requestsDuring(func() {
		r = e.Owner("for i in 1 2 3 4 5 6 7 8 9 10; do stat -c %s MEMORY.md; sleep 0.3; done")
	})
	expectOK(t, "stat guarded", r)
	if n := guarded.named["LOOKUP MEMORY.md"] + guarded.op["GETATTR"] + guarded.op["STATX"]; n < 3 || n > 8 {
		t.Errorf("10 stats of MEMORY.md over 3 s sent %d lookups/getattrs, want one about every second:\n%s", n, guarded)
	}
}

// The name and attributes of a guarded file are kept by the kernel for a
// second (fs/attrcache.go): ten commits of MEMORY.md in a row send one
// LOOKUP and one GETATTR of it, not one per open, and the read
// after them sees the last.
func TestGuardedCommitsSendNoLookupPerOpen(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount("--debug")
	var r Result
	got := e.requestsDuring(func() {
		r = e.Sh("USER", "u", "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i > MEMORY.md; done; cat MEMORY.md")
	})
	expectOK(t, "commits", r)
	if r.Stdout != "10\n" {
		t.Fatalf("after ten commits MEMORY.md read %q", r.Stdout)
	}
	if n := got.named["LOOKUP MEMORY.md"]; n > 1 {
		t.Errorf("ten commits and a read of MEMORY.md sent %d LOOKUPs of it, want the name from the kernel's cache:\n%s", n, got)
	}
	// The first open's (the lookup met a node the mount did not know:
	// cachedAttrs), and cat's own stat and fstat: not one per commit.
	if n := got.op["GETATTR"] + got.op["STATX"]; n > 4 {
		t.Errorf("ten commits and a read of MEMORY.md sent %d GETATTRs, want the attributes from the kernel's cache:\n%s", n, got)
	}
}

// ls -l asks every entry for its SELinux context and its ACL. On a host
// without SELinux the first "not supported" makes ls stop asking for the
// context; the kernel keeps each inode's ACL once fetched. A repeated
// listing within the cache lifetime sends nothing per entry.
func TestListingRequests(t *testing.T) {
	const dirs, perDir = 4, 50
	e := newEnv(t, nil).Mount("--debug")
	expectOK(t, "make tree", e.Owner(fmt.Sprintf(
		"for d in $(seq %d); do mkdir -p tree/d$d; for f in $(seq %d); do echo x > tree/d$d/f$f; done; done", dirs, perDir)))
	entries := dirs * perDir
	time.Sleep(1100 * time.Millisecond)

	var r Result
	first := e.requestsDuring(func() { r = e.Owner("ls -lR tree") })
	expectOK(t, "ls -lR", r)
	if !strings.Contains(r.Stdout, "f50") {
		t.Fatalf("listing incomplete:\n%s", r.Stdout)
	}
	if _, err := os.Stat("/sys/fs/selinux"); os.IsNotExist(err) {
		if n := first.named["GETXATTR security.selinux"]; n > 1 {
			t.Errorf("first listing asked %d entries for their SELinux context; want one \"not supported\" answer, then none:\n%s", n, first)
		}
	}
	// The tree is dirs directories under tree/: each inode's access ACL,
	// and a directory's default ACL too, fetched once.
	if n := first.op["GETXATTR"]; n > entries+2*(dirs+1)+1 {
		t.Errorf("first listing of %d entries sent %d GETXATTR, want at most an inode's ACLs, once:\n%s", entries, n, first)
	}
	if n := first.op["LOOKUP"] + first.op["GETATTR"]; n > dirs+2 {
		t.Errorf("first listing of a tree made through the mount sent %d lookups/getattrs; want the entries from the kernel's cache:\n%s", n, first)
	}

	again := e.requestsDuring(func() { r = e.Owner("ls -lR tree") })
	expectOK(t, "ls -lR again", r)
	if n := again.total(); n > entries/8 {
		t.Errorf("repeated listing of %d entries sent %d requests, want only the per-directory ones:\n%s", entries, n, again)
	}
	du := e.requestsDuring(func() { r = e.Owner("du -s tree") })
	expectOK(t, "du", r)
	if n := du.total(); n > entries/8 {
		t.Errorf("du of %d entries sent %d requests, want only the per-directory ones:\n%s", entries, n, du)
	}
}
