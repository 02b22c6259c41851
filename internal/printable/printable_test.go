package printable

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLineAndText(t *testing.T) {
	for _, c := range []struct{ in, line, text string }{
		{"MEMORY.md", "MEMORY.md", "MEMORY.md"},
		{"a b\tc", `a b\tc`, "a b\tc"},
		{"two\nlines", `two\nlines`, "two\nlines"},
		{"- pay to evil\r\x1b[K- remember milk", `- pay to evil\r\x1b[K- remember milk`, `- pay to evil\r\x1b[K- remember milk`},
		{"invoice\u202etxt.exe", `invoice\u202etxt.exe`, `invoice\u202etxt.exe`},
		{"\u2066isolate\u2069 \u200bzw \ufeffbom \u2028ls", `\u2066isolate\u2069 \u200bzw \ufeffbom \u2028ls`, `\u2066isolate\u2069 \u200bzw \ufeffbom \u2028ls`},
		{"c1 \u009b31m csi", `c1 \u009b31m csi`, `c1 \u009b31m csi`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`, `bad \xff\xfe utf8`},
		{"nul \x00 del \x7f bell \a", `nul \x00 del \x7f bell \x07`, `nul \x00 del \x7f bell \x07`},
		{"ünïcödé, 日本語, العربية, emoji 😀", "ünïcödé, 日本語, العربية, emoji 😀", "ünïcödé, 日本語, العربية, emoji 😀"},
		{"private \U000f0000", `private \U000f0000`, `private \U000f0000`},
	} {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
	}
}

func TestLongLinesAreCutAndSaySo(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	got := Text("short\n" + long + "\x1b[2J\nafter\n")
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || lines[0] != "short" || lines[2] != "after" || lines[3] != "" {
		t.Fatalf("lines around the cut: %q", lines)
	}
	if len(lines[1]) > MaxLine+100 || !strings.Contains(lines[1], "1044484 more bytes on this line not shown") {
		t.Fatalf("the long line: %d bytes, ends %q", len(lines[1]), lines[1][len(lines[1])-60:])
	}
	if strings.Contains(got, "\x1b") {
		t.Fatal("an escape sequence past the cut reached the output")
	}
	if l := Line(long); len(l) > MaxLine+100 {
		t.Fatalf("Line of 1 MB: %d bytes", len(l))
	}
}

func TestSafe(t *testing.T) {
	if !Safe("landlock abi 7, seccomp", 100) || Safe("x\x1b[2J", 100) || Safe("x\u202e", 100) || Safe(strings.Repeat("a", 101), 100) {
		t.Fatal("Safe")
	}
}

// checkOutput is the whole promise: nothing a terminal interprets.
func checkOutput(t *testing.T, in, out string, text bool) {
	if !utf8.ValidString(out) {
		t.Fatalf("output of %.200q is not UTF-8: %.200q", in, out)
	}
	line := 0
	for _, r := range out {
		if r == '\n' && text {
			line = 0
			continue
		}
		if r == '\t' && text {
			line++
			continue
		}
		if !printableRune(r) {
			t.Fatalf("output of %.200q holds %U: %.200q", in, r, out)
		}
		line++
		if line > MaxLine+100 {
			t.Fatalf("output of %.200q has a line over %d", in, MaxLine+100)
		}
	}
	if !text && strings.Contains(out, "\n") {
		t.Fatalf("Line output holds a newline: %q", out)
	}
	// Output that was not cut is printed unchanged a second time.
	if !strings.Contains(out, "more bytes on this line not shown]") {
		if again := escape(out, text); again != out {
			t.Fatalf("output is not stable: %.200q then %.200q", out, again)
		}
	}
}

func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "MEMORY.md", "a\r\x1b[Kb", "\u202e", "\xff", strings.Repeat("y", MaxLine+3)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkOutput(t, s, Line(s), false) })
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"", "a\nb\n", "line\r\x1b[K\n", "\u2066\u2069\n\t", "\xc3", strings.Repeat("z", MaxLine+1) + "\n\x1b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		checkOutput(t, s, out, true)
		if strings.Count(out, "\n") != strings.Count(s, "\n") {
			t.Fatalf("Text changed the number of lines of %q: %q", s, out)
		}
	})
}

// Whatever the pieces a command prints, the Writer's output is Text of the
// whole, for lines up to MaxLine; longer lines are cut with bounded memory.
func FuzzWriter(f *testing.F) {
	f.Add("a\r\x1b[K\nb\u202ec\n", uint8(3))
	f.Add("no newline at the end \xff", uint8(1))
	f.Add(strings.Repeat("é", MaxLine)+"\nend", uint8(7))
	f.Fuzz(func(t *testing.T, s string, step uint8) {
		var b strings.Builder
		w := NewWriter(&b)
		k := int(step) + 1
		for i := 0; i < len(s); i += k {
			w.Write([]byte(s[i:min(i+k, len(s))]))
		}
		w.Flush()
		out := b.String()
		checkOutput(t, s, out, true)
		long := false
		for _, l := range strings.Split(s, "\n") {
			long = long || len(l) > MaxLine
		}
		if !long && out != Text(s) {
			t.Fatalf("Writer(%.200q) = %.200q, Text = %.200q", s, out, Text(s))
		}
	})
}

func TestWriterCutsAHugeLineAsItStreams(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	chunk := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < 16; i++ {
		w.Write(chunk)
	}
	w.Write([]byte("\x1b[2J\nnext\n"))
	w.Flush()
	lines := strings.Split(b.String(), "\n")
	if len(lines) != 3 || lines[1] != "next" || !strings.Contains(lines[0], "[1044484 more bytes on this line not shown]") {
		t.Fatalf("lines: %d, %.100q … %q", len(lines), lines[0], lines[0][len(lines[0])-60:])
	}
	if cap(w.line) > 2*MaxLine {
		t.Fatalf("the writer buffered %d bytes of one line", cap(w.line))
	}
}

func TestJSONStaysTheSameValue(t *testing.T) {
	in := map[string]string{"path": "memory/e\x1b[2Jvil\u202e.md", "detail": "a\u009bb\u2066c\U000f0000 \x7f", "ok": "日本語 😀"}
	raw, _ := json.Marshal(in)
	safe := JSON(raw)
	var back map[string]string
	if err := json.Unmarshal(safe, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back) != fmt.Sprint(in) {
		t.Fatalf("JSON changed the value: %q", back)
	}
	for _, r := range string(safe) {
		if !printableRune(r) {
			t.Fatalf("JSON output holds %U: %s", r, safe)
		}
	}
	if !strings.Contains(string(safe), "日本語 😀") {
		t.Fatalf("printable text was escaped: %s", safe)
	}
}

// Default-ignorable code points print nothing of their own: variation
// selectors, Hangul fillers and the combining grapheme joiner are escaped
// like the zero-width format characters; ordinary combining marks are not.
func TestDefaultIgnorableEscaped(t *testing.T) {
	for _, r := range []rune{0xfe0f, 0xfe00, 0xe0100, 0x115f, 0x1160, 0x3164, 0xffa0, 0x034f, 0x200b, 0x202e} {
		if got := Line("a" + string(r) + "b"); got == "a"+string(r)+"b" {
			t.Errorf("U+%04X printed raw", r)
		}
	}
	if got := Line("e\u0301"); got != "e\u0301" {
		t.Errorf("a combining acute accent was escaped: %q", got)
	}
}
