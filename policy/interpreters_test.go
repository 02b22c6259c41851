package policy

import (
	"strings"
	"testing"
)

func TestInterpretersDefault(t *testing.T) {
	p := Default()
	for exe, want := range map[string]bool{
		"/usr/bin/sh": true, "/usr/bin/bash": true, "/bin/dash": true, "/usr/bin/python3": true,
		"/usr/bin/python3.11": true, "/usr/local/bin/node": true, "/usr/bin/perl": true, "/usr/bin/perl5.36.0": true,
		"/usr/bin/ruby3.1": true, "/usr/bin/php8.2": true, "/lib64/ld-linux-x86-64.so.2": true, "/lib/ld-musl-x86_64.so.1": true,
		"/usr/bin/cat": false, "/usr/bin/git": false, "/usr/bin/pythonista-helper": false, "/usr/bin/shred": false,
		"/usr/bin/nodemon": false,
	} {
		if got := p.Interpreter(exe); got != want {
			t.Errorf("Interpreter(%q) = %v, want %v", exe, got, want)
		}
	}
}

func TestInterpretersKey(t *testing.T) {
	p, err := Parse("p.yaml", []byte("version: 1\ninterpreters: [python3, /opt/tools/*/run]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for exe, want := range map[string]bool{"/usr/bin/python3": true, "/opt/tools/x/run": true, "/usr/bin/bash": false, "/usr/bin/run": false} {
		if got := p.Interpreter(exe); got != want {
			t.Errorf("Interpreter(%q) = %v, want %v", exe, got, want)
		}
	}
	if p, err := Parse("p.yaml", []byte("version: 1\ninterpreters: []\n")); err != nil || p.Interpreter("/usr/bin/sh") {
		t.Errorf("an empty list: %v, sh an interpreter: %v", err, err == nil && p.Interpreter("/usr/bin/sh"))
	}
	for _, bad := range []string{
		"interpreters: python3",
		"interpreters: [bin/python3]",
		"interpreters: [\"\"]",
		"interpreters: [\"[a\"]",
		"interpreters: [{match: sh}]",
	} {
		_, err := Parse("p.yaml", []byte("version: 1\n"+bad+"\n"))
		var pe *Error
		if err == nil || !strings.Contains(err.Error(), "p.yaml:2") {
			t.Errorf("%s: want an error at p.yaml:2, got %v", bad, err)
		}
		_ = pe
	}
}
