package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aerfs/aerfs/evidence"
)

// A power loss while a session appends to MEMORY.md: the daemon dies in the
// middle of a stream of commits, and everything that was written but not
// flushed is lost — the evidence log, index and hashes past the signed
// checkpoint, the blob files of the versions since, and MEMORY.md's last
// renames (it is put back to the last version the checkpoint covers). Only
// what was flushed survives: the checkpoint and the evidence journal,
// which is all a commit waits for. The next mount must rebuild every
// acknowledged record and its content from the journal, complete the
// write to MEMORY.md, and the state must verify: every line the writer was
// told was committed is in MEMORY.md and has its record.
func TestJournalPowerLossRebuildsAcknowledgedCommits(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "base\n"}).Mount()
	pid := daemonPid(t, e)
	var wg sync.WaitGroup
	var w Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		w = e.Run("USER", "appender", "python3", "-c", `
for n in range(1000000):
    line = "line-%d\n" % n
    try:
        with open("MEMORY.md", "a") as f:
            f.write(line)
    except OSError:
        break
    print(line, end="", flush=True)
`)
	}()
	waitFor(t, "the appender to commit", func() bool { return strings.Contains(e.Read("MEMORY.md"), "line-20\n") })
	time.Sleep(120 * time.Millisecond) // into a checkpoint interval (200 ms)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return syscall.Kill(pid, 0) != nil })
	wg.Wait()
	var acked []string
	for _, l := range strings.Split(w.Stdout, "\n") {
		if l != "" {
			acked = append(acked, l+"\n")
		}
	}
	// The power loss, applied to what the dead daemon left.
	expectOK(t, "umount the dead mount", runCmd("/", nil, "umount", "-l", e.WS))
	lost, base := losePastCheckpoint(t, e.State)
	if lost == 0 {
		t.Fatalf("every record was checkpointed when the daemon died: the test exercised nothing")
	}
	if err := os.WriteFile(filepath.Join(e.WS, "MEMORY.md"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	expectOK(t, "remount", runCmd("/", nil, aerfsBin, "mount", "--state", e.State, e.WS))
	expectOK(t, "verify", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))

	rebuilt := false
	for _, le := range e.records("recovery", "") {
		if le.Record.Meta.Op == "open" && le.Record.Payload != nil && strings.Contains(le.Record.Payload.Detail, "acknowledged records rebuilt") {
			rebuilt = true
		}
	}
	if !rebuilt {
		t.Fatalf("no recovery record says the journal rebuilt records (%d were cut)", lost)
	}
	got := e.Read("MEMORY.md")
	for _, l := range acked {
		if !strings.Contains(got, l) {
			t.Fatalf("acknowledged line %q is missing from MEMORY.md after the power loss (%d lines acknowledged, %d records cut)", l, len(acked), lost)
		}
	}
	if d := e.records("drift", ""); len(d) != 0 {
		t.Fatalf("an acknowledged version was called drift: %s", describe(d))
	}
	t.Logf("%d lines acknowledged, %d records past the checkpoint lost from the log and rebuilt", len(acked), lost)
}

// losePastCheckpoint does to stateDir what a power loss does to what a
// dead daemon wrote but did not flush: the log, index and hashes past the
// signed checkpoint, and the blob files named only by records past it. It
// returns how many records it cut, and MEMORY.md's content as of the
// checkpoint.
func losePastCheckpoint(t *testing.T, stateDir string) (int, []byte) {
	t.Helper()
	ev := filepath.Join(stateDir, "evidence")
	cpText, err := os.ReadFile(filepath.Join(ev, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	body, _, _ := strings.Cut(string(cpText), "\n\n")
	cp, err := evidence.ParseCheckpointBody(body + "\n")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := os.ReadFile(filepath.Join(ev, "index"))
	if err != nil || int64(len(idx)) < cp.Size*40 {
		t.Fatalf("index: %v (%d bytes for %d records)", err, len(idx), cp.Size)
	}
	var cpEnd int64
	if cp.Size > 0 {
		cpEnd = int64(binary.BigEndian.Uint64(idx[(cp.Size-1)*40:]))
	}
	log, err := os.ReadFile(filepath.Join(ev, "log"))
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{}
	var base []byte
	lines := func(b []byte, f func(*evidence.Record)) {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, evidence.MaxRecordSize+1)
		for sc.Scan() {
			r, err := evidence.ParseRecord(sc.Bytes())
			if err != nil {
				t.Fatalf("log line: %v", err)
			}
			f(r)
		}
	}
	lines(log[:cpEnd], func(r *evidence.Record) {
		if r.Payload == nil {
			return
		}
		for _, h := range r.Payload.BlobRefs() {
			keep[h] = true
		}
		if r.Type == evidence.TypeWrite && r.Meta.Path == "MEMORY.md" {
			b, err := evidence.ReadBlob(stateDir, r.Payload.NewHash)
			if err != nil {
				t.Fatal(err)
			}
			base = b
		}
	})
	cut := 0
	lost := map[string]bool{}
	lines(log[cpEnd:], func(r *evidence.Record) {
		cut++
		if r.Payload == nil {
			return
		}
		for _, h := range r.Payload.BlobRefs() {
			if h != "" && !keep[h] {
				os.Remove(filepath.Join(ev, "blobs", h[:2], h[2:]))
				lost[h] = true
			}
		}
	})
	if len(lost) > 0 && losePackedSince(t, ev, lost) == 0 {
		t.Fatalf("none of the %d versions past the checkpoint is in a pack", len(lost))
	}
	if base == nil {
		base = []byte("base\n")
	}
	for name, size := range map[string]int64{"log": cpEnd, "index": cp.Size * 40, "hashes": tlog.StoredHashCount(cp.Size) * tlog.HashSize} {
		if err := os.Truncate(filepath.Join(ev, name), size); err != nil {
			t.Fatal(err)
		}
	}
	return cut, base
}

// losePackedSince does to the packs what a power loss does to entries
// appended since their last flush: the first entry holding content in lost
// and everything after it in its pack keep their place (the size reached
// the disk) and lose their bytes. Packs are read as
// docs/evidence-format.md describes them.
func losePackedSince(t *testing.T, ev string, lost map[string]bool) int {
	t.Helper()
	zeroed := 0
	des, _ := os.ReadDir(filepath.Join(ev, "packs"))
	for _, de := range des {
		p := filepath.Join(ev, "packs", de.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for o := 0; o+48 <= len(b) && string(b[o:o+8]) == "aerfsPK1"; {
			n := int(binary.BigEndian.Uint64(b[o+40 : o+48]))
			if lost[hex.EncodeToString(b[o+8:o+40])] {
				zeroed += len(b) - o
				clear(b[o:])
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				break
			}
			o += 48 + n
		}
	}
	return zeroed
}
