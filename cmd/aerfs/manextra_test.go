package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every page says how the command exits and which files it uses, and the
// policy file and the mount helper have pages of their own.
func TestManPagesHaveExitStatusFilesAndSections5And8(t *testing.T) {
	dir := t.TempDir()
	root := newRootCommand()
	root.SetArgs([]string{"man", dir})
	captureStderr(t, func() {
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
	})
	pages, _ := filepath.Glob(filepath.Join(dir, "aerfs*.1"))
	if len(pages) < 30 {
		t.Fatalf("only %d pages", len(pages))
	}
	for _, p := range pages {
		b, _ := os.ReadFile(p)
		s := string(b)
		ex, files, see := strings.Index(s, ".SH EXIT STATUS"), strings.Index(s, ".SH FILES"), strings.Index(s, ".SH SEE ALSO")
		if ex < 0 || files < ex || see >= 0 && see < files {
			t.Errorf("%s: EXIT STATUS then FILES, before SEE ALSO: %d %d %d", filepath.Base(p), ex, files, see)
		}
	}
	verify, _ := os.ReadFile(filepath.Join(dir, "aerfs-verify.1"))
	status, _ := os.ReadFile(filepath.Join(dir, "aerfs-status.1"))
	if !strings.Contains(string(verify), "\\fB14\\fR") || strings.Contains(string(status), "\\fB14\\fR") {
		t.Errorf("verify's codes belong on verify's page (and aerfs's), not status's")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "aerfs.yaml.5")); err != nil || string(b) != ".so man5/aerfs-policy.5\n" {
		t.Errorf("aerfs.yaml.5 (man aerfs.yaml): %q %v", b, err)
	}
	for _, name := range []string{"aerfs-policy.5", "mount.fuse.aerfs.8"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.Contains(string(b), ".SH NAME") || !strings.Contains(string(b), ".SH DESCRIPTION") {
			t.Errorf("%s: %v", name, err)
		}
	}
	pol, _ := os.ReadFile(filepath.Join(dir, "aerfs-policy.5"))
	if !strings.Contains(string(pol), "blocking_taint:") {
		t.Errorf("aerfs-policy.5 lacks the default policy")
	}
	// A line of the policy file that starts with '.' or '\'' must not
	// become a troff request.
	for _, l := range strings.Split(strings.Split(strings.Split(string(pol), ".nf\n")[1], ".fi\n")[0], "\n") {
		if strings.HasPrefix(l, ".") && l != ".RS 2" && l != ".RE" {
			t.Errorf("a policy line read as a troff request: %q", l)
		}
	}
}

// The README's table of exit codes is the one the code and the manual use.
func TestReadmeExitCodesMatchTheCode(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| ([0-9]+) \| (.+) \|$`).FindAllStringSubmatch(string(b), -1)
	got := map[int]string{}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[1])
		got[n] = strings.ReplaceAll(r[2], "`", "")
	}
	for _, e := range exitCodes {
		if got[e.code] != e.meaning {
			t.Errorf("exit %d: README says %q, the manual %q", e.code, got[e.code], e.meaning)
		}
	}
	if len(got) != len(exitCodes) {
		t.Errorf("README lists %d codes, the code %d", len(got), len(exitCodes))
	}
}
