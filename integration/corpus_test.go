package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Content independence: every injection of deepset/prompt-injections
// (train split, label 1) is refused from a WEB session and accepted,
// byte for byte, from a clean USER session. The decision never looks at
// the bytes.

type corpusOutcome struct {
	I   int    `json:"i"`
	OK  bool   `json:"ok"`
	Err string `json:"err"`
}

func loadInjections(t *testing.T) []string {
	f, err := os.Open("testdata/deepset-train.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var row struct {
			Text  string `json:"text"`
			Label int    `json:"label"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		if row.Label == 1 {
			out = append(out, row.Text)
		}
	}
	return out
}

func parseOutcomes(t *testing.T, r Result) []corpusOutcome {
	var out []corpusOutcome
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if line == "" {
			continue
		}
		var o corpusOutcome
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("outcome line %q: %v\n%s", line, err, r)
		}
		out = append(out, o)
	}
	return out
}

func TestCorpusContentIndependence(t *testing.T) {
	payloads := loadInjections(t)
	if len(payloads) != 203 {
		t.Fatalf("deepset-train has %d injections, want 203", len(payloads))
	}
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	mem := e.Hash("MEMORY.md")
	corpus, _ := os.Getwd()
	corpus += "/testdata/deepset-train.jsonl"

	// WEB: one process writes every payload, one open/write/close each.
	web := parseOutcomes(t, e.ShT("WEB", "corpus-web", `$PY $OPS corpus `+corpus+` MEMORY.md`))
	if len(web) != len(payloads) {
		t.Fatalf("WEB reported %d outcomes, want %d", len(web), len(payloads))
	}
	for _, o := range web {
		if o.OK {
			bugErrorf(t, "WEB payload %d was accepted: %q", o.I, payloads[o.I])
		}
	}
	if e.Hash("MEMORY.md") != mem {
		bugf(t, "MEMORY.md changed under WEB payloads")
	}
	// Every refused payload is in the log: one by one, or in the count
	// of a summary of the refusals the process repeated (recorded when
	// the minute or the mount ends; checked after the unmount below).
	webRefused := len(web)

	// USER: the same bytes, accepted; after each, MEMORY.md is exactly that
	// payload. One session per payload would be slow; instead the writer
	// checks each commit by reading back through a fresh descriptor.
	script := `$PY - "$1" <<'EOF'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
i = 0
for row in rows:
    if row["label"] != 1:
        continue
    out = {"i": i, "ok": True, "err": ""}
    data = row["text"].encode("utf-8")
    try:
        fd = os.open("MEMORY.md", os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        with open("MEMORY.md", "rb") as f:
            got = f.read()
        if got != data:
            out["ok"], out["err"] = False, "read back %r" % got[:80]
    except OSError as e:
        out["ok"], out["err"] = False, e.strerror or str(e)
    print(json.dumps(out), flush=True)
    i += 1
EOF`
	r := runCmd(e.WS, toolEnv(t), aerfsBin, "run", "--workspace", e.WS, "--principal", "USER", "--session", "corpus-user", "--", "sh", "-c", script, "sh", corpus)
	user := parseOutcomes(t, r)
	if len(user) != len(payloads) {
		t.Fatalf("USER reported %d outcomes, want %d\n%s", len(user), len(payloads), r)
	}
	bad := 0
	for _, o := range user {
		if !o.OK {
			bad++
			if bad <= 5 {
				bugErrorf(t, "USER payload %d: %s", o.I, o.Err)
			}
		}
	}
	if bad > 0 {
		bugErrorf(t, "%d of %d payloads were not committed intact by a clean USER session", bad, len(payloads))
	}
	if got := e.Hash("MEMORY.md"); got != sha(payloads[len(payloads)-1]) {
		bugf(t, "MEMORY.md after the USER run is not the last payload")
	}
	// Every accepted payload is a write record with the payload's hash.
	want := map[string]bool{}
	for _, p := range payloads {
		want[sha(p)] = true
	}
	for _, le := range e.Log() {
		if le.Record.Type == "write" && le.Record.Meta.Session == "corpus-user" && le.Record.Payload != nil {
			delete(want, le.Record.Payload.NewHash)
		}
	}
	if len(want) > 0 {
		bugErrorf(t, "%d payloads have no write record with their hash", len(want))
	}
	e.Unmount()
	var webDenials []LogEntry
	for _, le := range e.Denials("MEMORY.md") {
		if le.Record.Meta.Session == "corpus-web" {
			webDenials = append(webDenials, le)
		}
	}
	if n := refusals(webDenials); n < webRefused {
		bugErrorf(t, "%d refusals of MEMORY.md to the WEB session in the log (%d records) for %d refused payloads", n, len(webDenials), webRefused)
	}
}
