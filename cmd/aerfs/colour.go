package main

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// # Colour, as git does it
//
// log, status, pending and diff colour what the owner looks for —
// refusals red, allowed requests green, a diff's added and removed lines —
// when standard output is a terminal, NO_COLOR is unset or empty
// (no-color.org), TERM is not "dumb", and the output is not --json. The
// colour is added below the printable writer (textout.go), to lines that
// are already escaped: nothing a session chose can carry an escape
// sequence to the terminal, and the codes added are only the few below.

const (
	sgrReset  = "\x1b[m"
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
	sgrCyan   = "\x1b[36m"
	sgrBold   = "\x1b[1m"
	sgrRedB   = "\x1b[1;31m"
)

// colourOn says whether output to a terminal may be coloured.
func colourOn() bool {
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// lineColours are the commands whose lines are coloured, and how.
var lineColours = map[string]func(string) string{
	"aerfs log":     colourLogLine,
	"aerfs status":  colourStatusLine,
	"aerfs pending": colourDiffLine,
	"aerfs diff":    colourDiffLine,
}

// colourWriter colours each whole line written through it.
type colourWriter struct {
	w      io.Writer
	colour func(string) string
	buf    []byte
}

func (c *colourWriter) Write(b []byte) (int, error) {
	c.buf = append(c.buf, b...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := io.WriteString(c.w, c.colour(string(c.buf[:i]))+"\n"); err != nil {
			return 0, err
		}
		c.buf = c.buf[i+1:]
	}
}

// flush writes an unfinished last line.
func (c *colourWriter) flush() {
	if len(c.buf) > 0 {
		io.WriteString(c.w, c.colour(string(c.buf)))
		c.buf = nil
	}
}

func paint(s, sgr string) string { return sgr + s + sgrReset }

// colourLogLine colours the verdict column of a record line (idx, time,
// type, verdict …): deny red, allow green; a quarantine's type yellow.
func colourLogLine(l string) string {
	f := fieldSpans(l, 4)
	if len(f) < 4 {
		return l
	}
	typ, verdict := l[f[2][0]:f[2][1]], l[f[3][0]:f[3][1]]
	sgr := ""
	switch verdict {
	case "deny":
		sgr = sgrRed
	case "allow":
		sgr = sgrGreen
	}
	out := l
	if sgr != "" {
		out = l[:f[3][0]] + paint(verdict, sgr) + l[f[3][1]:]
	}
	if typ == "quarantine" || typ == "drift" {
		out = out[:f[2][0]] + paint(typ, sgrYellow) + out[f[2][1]:]
	}
	return out
}

// fieldSpans gives the start and end of the first n space-separated fields.
func fieldSpans(l string, n int) [][2]int {
	var out [][2]int
	i := 0
	for len(out) < n {
		for i < len(l) && l[i] == ' ' {
			i++
		}
		if i == len(l) {
			break
		}
		j := i
		for j < len(l) && l[j] != ' ' {
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// colourStatusLine marks what needs the owner in aerfs status.
func colourStatusLine(l string) string {
	switch {
	case strings.HasPrefix(l, "evidence:    LOG FAILING"):
		return paint(l, sgrRedB)
	case strings.HasPrefix(l, "evidence:    log healthy"):
		return strings.Replace(l, "log healthy", paint("log healthy", sgrGreen), 1)
	case strings.HasPrefix(l, "drift:"):
		return paint(l, sgrYellow)
	case strings.HasSuffix(l, "  QUARANTINED (burst of refusals)"):
		return strings.TrimSuffix(l, "QUARANTINED (burst of refusals)") + paint("QUARANTINED (burst of refusals)", sgrRedB)
	case strings.HasPrefix(l, "  ") && strings.Contains(l, " taint=") && !strings.Contains(l, " taint=none "):
		i := strings.Index(l, " taint=") + 1
		j := strings.IndexByte(l[i:], ' ')
		if j < 0 {
			j = len(l) - i
		}
		return l[:i] + paint(l[i:i+j], sgrYellow) + l[i+j:]
	}
	return l
}

// colourDiffLine colours a unified diff as git does, and the header line
// of a pending item (its id).
func colourDiffLine(l string) string {
	switch {
	case strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "--- "):
		return paint(l, sgrBold)
	case strings.HasPrefix(l, "@@"):
		return paint(l, sgrCyan)
	case strings.HasPrefix(l, "+"):
		return paint(l, sgrGreen)
	case strings.HasPrefix(l, "-"):
		return paint(l, sgrRed)
	case len(l) > 14 && isHexID(l[:12]) && l[12:14] == "  ":
		return paint(l[:12], sgrYellow) + l[12:]
	}
	return l
}

func isHexID(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
