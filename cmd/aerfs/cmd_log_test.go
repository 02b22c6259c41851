package main

import "testing"

// Text a session chose (a file name, a command name in a refused request)
// reaches the owner's terminal quoted when it carries control characters:
// no escape sequence, no line that looks like another record.
func TestShowNameQuotesControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"MEMORY.md":                   "MEMORY.md",
		"notes/é.md":                  "notes/é.md",
		"a\nb":                        `"a\nb"`,
		"\x1b[31mRED":                 `"\x1b[31mRED"`,
		"aerfs log\n2099-01-01 allow": `"aerfs log\n2099-01-01 allow"`,
		"bad\xffname":                 `"bad\xffname"`,
	} {
		if got := showName(in); got != want {
			t.Errorf("showName(%q) = %s, want %s", in, got, want)
		}
	}
}
