package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/internal/printable"
)

// Colour is added below the printable writer: what a session chose (here
// a path with escape sequences) reaches the terminal escaped, and the only
// sequences in the output are the colours aerfs adds.
func TestColourBelowPrintable(t *testing.T) {
	var out bytes.Buffer
	cw := &colourWriter{w: &out, colour: colourLogLine}
	pw := printable.NewWriter(cw)
	pw.Write([]byte("    16 2026-11-27T00:00:36.848Z verdict       deny  R3-principal     WEB         session=w write \x1b]0;evil\x07\x1b[32mMEMORY.md\n"))
	pw.Write([]byte("    17 2026-11-27T00:00:36.848Z write         allow R4-ok            USER        MEMORY.md\n"))
	pw.Flush()
	cw.flush()
	got := out.String()
	for _, seq := range regexp.MustCompile("\x1b[^m]*m?").FindAllString(got, -1) {
		switch seq {
		case sgrRed, sgrGreen, sgrReset:
		default:
			t.Errorf("a sequence aerfs did not add reached the terminal: %q in %q", seq, got)
		}
	}
	if !strings.Contains(got, sgrRed+"deny"+sgrReset) || !strings.Contains(got, sgrGreen+"allow"+sgrReset) || !strings.Contains(got, `\x1b]0;evil\x07\x1b[32mMEMORY.md`) {
		t.Errorf("colouring: %q", got)
	}
}

func TestColourDiffAndStatusLines(t *testing.T) {
	for in, want := range map[string]string{
		"+added":                          sgrGreen + "+added" + sgrReset,
		"-removed":                        sgrRed + "-removed" + sgrReset,
		"@@ -1 +1,2 @@":                   sgrCyan + "@@ -1 +1,2 @@" + sgrReset,
		" context":                        " context",
		"217f313c42c0  MEMORY.md  by WEB": sgrYellow + "217f313c42c0" + sgrReset + "  MEMORY.md  by WEB",
		"evidence:    log healthy":        "evidence:    " + sgrGreen + "log healthy" + sgrReset,
		"  agent  USER  taint=WEB_DERIVED live=1": "  agent  USER  " + sgrYellow + "taint=WEB_DERIVED" + sgrReset + " live=1",
	} {
		got := colourDiffLine(in)
		if strings.HasPrefix(in, "evidence") || strings.HasPrefix(in, "  agent") {
			got = colourStatusLine(in)
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
