// Package printable is the one way text a session or file content can
// influence reaches the owner's terminal or page.
//
// # The threat
//
// The owner decides from what aerfs shows: aerfs pending and aerfs diff
// before an approval, history, log, status, session list, watch, why and
// the report before a restore. Everything they print that a session chose
// — file content, file and session names, exe paths, reasons, reports — is
// an attacker's text. Written raw, a line ending in "\r\x1b[K" erases
// itself on the terminal (the owner approves a payload he never saw), a
// bidi override (U+202E) shows "txt.exe" as "exe.txt", a forged newline
// prints a fake record, and a megabyte-long line pushes the rest of a diff
// off the screen.
//
// # The rule
//
// Line and Text escape every byte or character that is not printable:
// C0 and C1 controls, DEL, the terminal's escape character, carriage
// return, Unicode format characters (bidi embeddings, overrides and
// isolates, zero-width characters, the byte-order mark), line and paragraph
// separators, private-use and unassigned code points, and bytes that are
// not UTF-8. Escapes are Go's: \r, \n, \t, \x1b, \xff, \u202e. Lines longer
// than MaxLine bytes are cut, and the cut says how much is not shown.
// Text keeps line breaks (and tabs) and applies the rule line by line;
// Line escapes them too, for one field on one line. Output is valid UTF-8.
//
// Readers that want the exact bytes use the commands' --json output
// (encoding/json escapes controls; content travels as base64), never a
// terminal.
package printable

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxLine is the longest line (in bytes of the input) shown whole.
const MaxLine = 4096

// Line returns s escaped for one field on one line: line breaks and tabs
// are escaped too.
func Line(s string) string { return escape(s, false) }

// Text returns s escaped for a terminal line by line: line breaks (\n)
// and tabs stay, everything else not printable is escaped, and each line
// is cut at MaxLine.
func Text(s string) string { return escape(s, true) }

// Safe reports whether s is printed unchanged by Line and is at most max
// bytes long: what a daemon accepts as free text from a session.
func Safe(s string, max int) bool {
	return len(s) <= max && len(s) <= MaxLine && Line(s) == s
}

func escape(s string, text bool) string {
	if clean(s, text) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	lineStart := 0 // input offset where the current line began
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if text && r == '\n' {
			b.WriteByte('\n')
			i++
			lineStart = i
			continue
		}
		if i-lineStart >= MaxLine {
			// Cut the rest of this line.
			end := len(s)
			if text {
				if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
					end = i + j
				}
			}
			b.WriteString("…[" + strconv.Itoa(end-i) + " more bytes on this line not shown]")
			i = end
			continue
		}
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case text && r == '\t':
			b.WriteByte('\t')
		case printableRune(r):
			b.WriteString(s[i : i+n])
		default:
			b.WriteString(quoteRune(r))
		}
		i += n
	}
	return b.String()
}

// clean is the fast path: nothing to escape, no line too long.
func clean(s string, text bool) bool {
	line := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return cleanSlow(s, text)
		}
		if c == '\n' && text {
			line = 0
			continue
		}
		if c < 0x20 && !(text && c == '\t') || c == 0x7f {
			return false
		}
		if line++; line > MaxLine {
			return false
		}
	}
	return true
}

func cleanSlow(s string, text bool) bool {
	line := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return false
		case text && r == '\n':
			line = 0
			i += n
			continue
		case text && r == '\t':
		case !printableRune(r):
			return false
		}
		if line += n; line > MaxLine {
			return false
		}
		i += n
	}
	return true
}

// printableRune: a letter, mark, number, punctuation, symbol or the ASCII
// space — and not a format character (bidi controls, zero-width) nor a
// separator other than the space.
func printableRune(r rune) bool {
	if r == ' ' {
		return true
	}
	if r < 0x20 || r == 0x7f {
		return false
	}
	// Format characters (bidi controls, zero-width joiners) and the other
	// default-ignorable code points (variation selectors, Hangul fillers,
	// the combining grapheme joiner) show nothing of their own: a name or
	// a line could hide a difference in them.
	return unicode.IsPrint(r) && !unicode.Is(unicode.Cf, r) &&
		!unicode.Is(unicode.Variation_Selector, r) && !unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

func quoteRune(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x80 {
		return `\x` + hex2(byte(r))
	}
	if r <= 0xffff {
		return `\u` + pad(strconv.FormatInt(int64(r), 16), 4)
	}
	return `\U` + pad(strconv.FormatInt(int64(r), 16), 8)
}

func hex2(c byte) string { return pad(strconv.FormatInt(int64(c), 16), 2) }

func pad(s string, n int) string {
	if len(s) < n {
		return strings.Repeat("0", n-len(s)) + s
	}
	return s
}

// Writer applies Text to everything written through it, line by line, for
// a command that prints many pieces: a line is escaped once it is whole
// (Flush writes a last line without its newline), and a line that grows
// past MaxLine is cut as it streams, so memory stays bounded.
type Writer struct {
	w    io.Writer
	line []byte // the current line, up to MaxLine bytes (plus a partial rune)
	cut  int    // bytes of the current line dropped past MaxLine
	err  error
}

// NewWriter returns a Writer printing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Raw is the writer underneath, for output that is not text for a
// terminal (JSON goes through JSON first).
func (p *Writer) Raw() io.Writer { return p.w }

// Write implements io.Writer.
func (p *Writer) Write(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := MaxLine + utf8.UTFMax - len(p.line); room > 0 && p.cut == 0 {
			take := min(room, len(chunk))
			p.line = append(p.line, chunk[:take]...)
			p.cut += len(chunk) - take
		} else {
			p.cut += len(chunk)
		}
		if i < 0 {
			break
		}
		p.emit(true)
		b = b[i+1:]
	}
	return n, p.err
}

// Flush writes what is left of the last line.
func (p *Writer) Flush() error {
	if len(p.line) > 0 || p.cut > 0 {
		p.emit(false)
	}
	return p.err
}

func (p *Writer) emit(newline bool) {
	line := p.line
	extra := p.cut
	if len(line) > MaxLine {
		// The bytes kept past MaxLine (room for a whole last rune) are
		// cut too, unless nothing was dropped after them.
		if extra > 0 {
			extra += len(line) - MaxLine
			line = line[:MaxLine]
		}
	}
	s := escape(string(line), true) // no newline in it: Text keeps tabs
	if extra > 0 {
		s += "…[" + strconv.Itoa(extra) + " more bytes on this line not shown]"
	}
	if newline {
		s += "\n"
	}
	if p.err == nil {
		_, p.err = io.WriteString(p.w, s)
	}
	p.line, p.cut = p.line[:0], 0
}

// JSON makes JSON text (as encoding/json writes it: controls below 0x20
// already escaped) safe for a terminal without changing what it decodes
// to: every other character Line would escape is written as a \u escape
// (a surrogate pair above U+FFFF). The output is the same JSON value,
// lossless.
func JSON(b []byte) []byte {
	clean := true
	for i := 0; i < len(b); i++ {
		if c := b[i]; c >= 0x7f || c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == '\n' || r == '\t':
			out = append(out, b[i])
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...) // encoding/json never writes these
		case printableRune(r):
			out = append(out, b[i:i+n]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = append(out, `\u`+pad(strconv.FormatInt(int64(r1), 16), 4)+`\u`+pad(strconv.FormatInt(int64(r2), 16), 4)...)
		default:
			out = append(out, `\u`+pad(strconv.FormatInt(int64(r), 16), 4)...)
		}
		i += n
	}
	return out
}
