package daemon

import "testing"

// The reader runs only the reading commands, and only on this daemon's
// state: a --state or --workspace anywhere in the arguments is refused,
// "--" included (a flag that takes a value takes a following "--" as it).
func TestCheckReadArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"log", "--path", "MEMORY.md"}, true},
		{[]string{"snapshot", "list"}, true},
		{[]string{"snapshot", "create"}, false},
		{[]string{"restore", "MEMORY.md"}, false},
		{[]string{"log\nforged line"}, false},
		{[]string{"log", "--state", "/etc"}, false},
		{[]string{"log", "--state=/etc"}, false},
		{[]string{"log", "--path", "--", "--state", "/etc"}, false},
		{[]string{"history", "--", "--workspace=/"}, false},
		{nil, false},
	} {
		if got := checkReadArgs(c.args) == ""; got != c.ok {
			t.Errorf("checkReadArgs(%q): allowed %v, want %v", c.args, got, c.ok)
		}
	}
}
