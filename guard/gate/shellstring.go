package gate

import "strings"

// # What a shell command string sources
//
// A shell's -c string runs whatever it sources (`. FILE`, `source FILE`).
// The string is split into words as the shell splits it (quotes,
// backslashes, separators, redirections, command substitutions kept
// whole), and a sourced name is expanded with what can be known of it
// here; what cannot be known makes every file the shell reads count.

// sources reports whether a shell command string (with its arguments pos:
// $0, $1 …) sources the file (`. FILE`, `source FILE`). A sourced name is
// expanded with what can be known of it: the environment, the arguments,
// the string's own assignments. A name that cannot be known (a variable
// a loop, a read, a declaration or a function sets, one assigned more
// than once, arguments a set -- or a function rebinds, a command
// substitution, a pattern) may be any file, and so may a command whose
// name is itself an expansion, or any command once the string defines an
// alias: then every file the shell reads counts. The arguments of eval
// and the action of trap, and every command substitution, are read as
// command strings of their own.
func (c *cmdline) sources(code string, pos []string) bool {
	return c.sourcesIn(code, pos, 0)
}

func (c *cmdline) sourcesIn(code string, pos []string, depth int) bool {
	if depth > 8 {
		return true
	}
	words := shellWords(code)
	for _, w := range words {
		if w.text == "set" || w.text == "function" || strings.HasSuffix(w.text, "()") || w.fn {
			pos = nil // the positional parameters may be rebound, anywhere
		}
	}
	times := map[string]int{}
	unknown := map[string]bool{}
	for i, w := range words {
		if k, _, ok := strings.Cut(w.text, "="); ok && validName(k) {
			times[k]++
		}
		for _, sub := range substitutions(w.text) {
			if c.sourcesIn(sub, pos, depth+1) {
				return true
			}
		}
		if !w.cmd {
			continue
		}
		switch w.text {
		case "alias":
			return true
		case "for", "select":
			if i+1 < len(words) {
				unknown[words[i+1].text] = true
			}
		case "read", "mapfile", "readarray", "getopts", "declare", "local", "typeset", "export", "readonly", "printf":
			for _, a := range words[i+1:] {
				if a.cmd {
					break
				}
				n, _, _ := strings.Cut(a.text, "=")
				if validName(n) {
					unknown[n] = true
				}
			}
		}
	}
	for k, n := range times {
		if n > 1 {
			unknown[k] = true
		}
	}
	assigned := map[string]string{}
	for i, w := range words {
		if k, v, ok := strings.Cut(w.text, "="); ok && validName(k) {
			if x, known := c.expand(v, assigned, pos, unknown); known && !unknown[k] {
				assigned[k] = x
			} else {
				unknown[k] = true
			}
			continue
		}
		if !w.cmd {
			continue
		}
		if w.text == "eval" || w.text == "trap" {
			// eval runs its arguments as a command string, trap its
			// action: read them as one (quoted text expands there),
			// unless an expansion of this string makes it.
			var args []string
			for _, a := range words[i+1:] {
				if a.cmd || w.text == "trap" && len(args) == 1 {
					break
				}
				if a.text == "--" && len(args) == 0 {
					continue
				}
				if hasExpansion(a.text) {
					return true
				}
				args = append(args, strings.ReplaceAll(a.text, "\x00", ""))
			}
			if c.sourcesIn(strings.Join(args, " "), pos, depth+1) {
				return true
			}
			continue
		}
		if hasExpansion(w.text) {
			return true
		}
		if w.text != "." && w.text != "source" {
			continue
		}
		j := i + 1
		if j < len(words) && words[j].text == "--" {
			j++
		}
		if j >= len(words) {
			continue
		}
		op, known := c.expand(words[j].text, assigned, pos, unknown)
		if !known || strings.ContainsAny(op, "*?[") || c.abs(op) {
			return true
		}
	}
	return false
}

// closing is the index of the parenthesis that closes the one at open in
// s (len(s) when none does).
func closing(s string, open int) int {
	depth := 0
	for k := open; k < len(s); k++ {
		if s[k] == '(' {
			depth++
		} else if s[k] == ')' {
			if depth--; depth == 0 {
				return k
			}
		}
	}
	return len(s)
}

// substitutions are the command strings of the command substitutions in
// a word ($(…) and backquotes; quoted ones are text).
func substitutions(w string) []string {
	var subs []string
	for i := 0; i < len(w); i++ {
		switch {
		case w[i] == 0:
			i++
		case w[i] == '$' && i+1 < len(w) && w[i+1] == '(':
			k := closing(w, i+1)
			subs = append(subs, w[i+2:min(k, len(w))])
			i = k
		case w[i] == '`':
			k := strings.IndexByte(w[i+1:], '`')
			if k < 0 {
				subs = append(subs, w[i+1:])
				return subs
			}
			subs = append(subs, w[i+1:i+1+k])
			i += k + 1
		}
	}
	return subs
}

// hasExpansion reports whether a word of shellWords holds an unquoted
// expansion.
func hasExpansion(w string) bool {
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case 0:
			i++
		case '$', '`':
			return true
		}
	}
	return false
}

// shellWord is a word of a command string; cmd: it stands where a command
// name does (first in its command, or after command, builtin, exec or a
// keyword); fn: a function definition follows it (NAME ( )).
type shellWord struct {
	text string
	cmd  bool
	fn   bool
}

// shellKeywords are followed by a command.
var shellKeywords = set("then", "do", "else", "elif", "if", "while", "until", "!", "command", "builtin", "exec", "time", "nohup", "env")

// shellWords splits a command string into words at blanks, command
// separators and redirections, with quotes and backslashes removed (a
// `$` inside double quotes still expands; single-quoted and escaped text
// is kept apart from expansion by a NUL before each `$` it holds).
func shellWords(code string) []shellWord {
	var words []shellWord
	var w strings.Builder
	in, atCmd, redir, afterKw := false, true, false, false
	var heredocs []string // delimiters of here-documents whose bodies start at the next line
	flush := func() {
		if !in {
			return
		}
		t := w.String()
		w.Reset()
		in = false
		isCmd := atCmd && !redir
		words = append(words, shellWord{text: t, cmd: isCmd})
		switch {
		case redir:
			redir = false
		case isCmd && shellKeywords[t]:
			afterKw = true // still before the command's name
		case isCmd && afterKw && strings.HasPrefix(t, "-"):
			// an option of command, time, exec, env: still before it
		case isCmd && strings.Contains(t, "=") && validName(t[:strings.IndexByte(t, '=')]):
			// an assignment: still before the command's name
		default:
			atCmd, afterKw = false, false
		}
	}
	digits := func() bool {
		t := w.String()
		for i := 0; i < len(t); i++ {
			if t[i] < '0' || t[i] > '9' {
				return false
			}
		}
		return t != ""
	}
	var quote byte
	for i := 0; i < len(code); i++ {
		ch := code[i]
		switch {
		case quote == '\'':
			if ch == '\'' {
				quote = 0
			} else {
				if ch == '$' || ch == '`' {
					w.WriteByte(0)
				}
				w.WriteByte(ch)
			}
		case ch == '\\' && i+1 < len(code):
			i++
			if code[i] == '$' || code[i] == '`' {
				w.WriteByte(0)
			}
			w.WriteByte(code[i])
			in = true
		case quote == '"':
			if ch == '"' {
				quote = 0
			} else {
				w.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote = ch
			in = true
		case ch == '$' && i+1 < len(code) && code[i+1] == '(':
			// A command substitution stays in its word, whole.
			k := closing(code, i+1)
			w.WriteString(code[i:min(k+1, len(code))])
			i = k
			in = true
		case ch == '`':
			// So does a backquoted one.
			k := strings.IndexByte(code[i+1:], '`')
			if k < 0 {
				k = len(code) - i - 1
			}
			w.WriteString(code[i:min(i+k+2, len(code))])
			i += k + 1
			in = true
		case ch == '(' && i+1 < len(code) && code[i+1] == ')':
			// NAME ( ): a function definition.
			flush()
			if n := len(words); n > 0 {
				words[n-1].fn = true
			}
			i++
			atCmd = true
		case ch == '<' && strings.HasPrefix(code[i:], "<<") && !strings.HasPrefix(code[i:], "<<<"):
			// A here-document: its body, from the next line to the
			// delimiter's, is text, not commands.
			if in && digits() {
				w.Reset()
				in = false
			}
			flush()
			i += 2
			if i < len(code) && code[i] == '-' {
				i++
			}
			for i < len(code) && (code[i] == ' ' || code[i] == '\t') {
				i++
			}
			k := i
			for k < len(code) && strings.IndexByte(" \t\n;&|<>()", code[k]) < 0 {
				k++
			}
			heredocs = append(heredocs, strings.Trim(code[i:k], `'"\`))
			i = k - 1
		case ch == '<' || ch == '>':
			if in && digits() {
				w.Reset() // 2>file: a descriptor's number, not a word
				in = false
			}
			flush()
			redir = true
			for i+1 < len(code) && (code[i+1] == '>' || code[i+1] == '&' || code[i+1] == '<') {
				i++
			}
		case strings.IndexByte(" \t", ch) >= 0:
			flush()
		case ch == '\n' && len(heredocs) > 0:
			flush()
			atCmd, redir, afterKw = true, false, false
			for _, d := range heredocs {
				// Skip the body through the delimiter's line.
				for i+1 < len(code) {
					end := strings.IndexByte(code[i+1:], '\n')
					line := code[i+1:]
					if end >= 0 {
						line = code[i+1 : i+1+end]
					}
					if end < 0 {
						i = len(code)
					} else {
						i += end + 1
					}
					if strings.TrimLeft(line, "\t") == d {
						break
					}
				}
			}
			heredocs = nil
		case strings.IndexByte("\n;&|(){}", ch) >= 0:
			flush()
			atCmd, redir, afterKw = true, false, false
		default:
			w.WriteByte(ch)
			in = true
		}
	}
	flush()
	return words
}

func alnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func validName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] != '_' && !alnum(k[i]) {
			return false
		}
	}
	return true
}

// expand expands the parameters of w ($NAME, ${NAME}, $0–$9) from
// assigned, the positional arguments pos and the environment; known is
// false when w holds an expansion that cannot be known here (a command
// substitution, an arithmetic or an operator expansion, a backquote).
func (c *cmdline) expand(w string, assigned map[string]string, pos []string, unknown map[string]bool) (x string, known bool) {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		ch := w[i]
		if ch == 0 && i+1 < len(w) { // a quoted $: literal
			i++
			b.WriteByte(w[i])
			continue
		}
		if ch == '`' {
			return "", false
		}
		if ch != '$' || i+1 >= len(w) {
			b.WriteByte(ch)
			continue
		}
		j := i + 1
		var name string
		switch {
		case w[j] == '{':
			end := strings.IndexByte(w[j:], '}')
			if end < 0 {
				return "", false
			}
			name = w[j+1 : j+end]
			i = j + end
		case w[j] >= '0' && w[j] <= '9':
			name = w[j : j+1]
			i = j
		default:
			k := j
			for k < len(w) && (w[k] == '_' || alnum(w[k])) {
				k++
			}
			if k == j {
				return "", false // $(…), $((…)), $@, $* …
			}
			name = w[j:k]
			i = k - 1
		}
		switch {
		case name != "" && name[0] >= '0' && name[0] <= '9' && len(name) == 1:
			n := int(name[0] - '0')
			if pos == nil || n >= len(pos) {
				return "", false // rebound (set --, a function's arguments) or unset
			}
			b.WriteString(pos[n])
		case validName(name):
			if unknown[name] {
				return "", false
			}
			if v, ok := assigned[name]; ok {
				b.WriteString(v)
			} else if v, ok := c.env[name]; ok {
				b.WriteString(v)
			} else {
				return "", false // set where the string cannot show it (for, read, a function)
			}
		default:
			return "", false // ${x-y}, ${#x} …
		}
	}
	return b.String(), true
}
