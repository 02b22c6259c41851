package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aerfs/aerfs/configs"
)

// # Man pages beyond what cobra writes
//
// cobra writes NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXAMPLE and SEE ALSO
// from each command's help. A manual also says how a command exits and
// which files it uses; and the policy file (section 5) and the mount helper
// (section 8) have pages of their own, made from the files aerfs ships so
// that they cannot drift from them.

// exitCodes is the table of aerfs's exit codes (main.go's constants) as
// the manual and README state it.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "success"},
	{exitError, "any other error"},
	{exitUsage, "bad flags or arguments (e.g. an unknown principal, a workspace not yet initialised): the hint names the command to run"},
	{exitPolicy, "invalid policy file"},
	{exitRefused, "refused by the policy (e.g. aerfs run --principal USER from a WEB session)"},
	{exitNotMounted, "no aerfs mount or daemon for the workspace"},
	{exitNoWorkspace, "the workspace does not exist or is not a directory"},
	{exitIntegrity, "verify: integrity failure (records, blobs, proofs)"},
	{exitSchema, "verify: schema failure"},
	{exitSignature, "verify: signature failure"},
	{exitIO, "verify: I/O error"},
	{exitUnpinned, "verify: integrity verified, but origin not verified (a bundle checked without --key)"},
}

// manFiles is the FILES section every aerfs page shares.
const manFiles = `.TP
\fB$XDG_STATE_HOME/aerfs/\fR\fIWORKSPACE\fR\fB-\fR\fIXXXXXXXX\fR\fB/\fR (default \fB~/.local/state/aerfs/…\fR)
The state directory \fBaerfs init\fR makes, unless \fB--state\fR names another; it lies outside the workspace and is never reachable through the mount.
.TP
\fISTATE\fR\fB/aerfs.yaml\fR
The policy (\fBaerfs-policy\fR(5)); edits take effect at once, an invalid edit is refused and the old policy stays.
.TP
\fISTATE\fR\fB/evidence/\fR
The evidence log: records, Merkle index, signed checkpoints, journal and content blobs.
.TP
\fISTATE\fR\fB/key\fR, \fISTATE\fR\fB/key.pub\fR
The Ed25519 key that signs checkpoints, and its public half (\fBaerfs key\fR prints it).
.TP
\fISTATE\fR\fB/control.sock\fR, \fB/run/aerfs/\fR\fIID\fR\fB/control.sock\fR
The daemon's control socket (under /run/aerfs when the daemon runs as root); every request is authorised by its peer's credentials.
.TP
\fISTATE\fR\fB/daemon.log\fR
The daemon's JSON log lines, rotated by size.
.TP
\fIWORKSPACE\fR\fB/.aerfs/status\fR, \fB.aerfs/status.json\fR
Read-only, answered by the mount to each process about itself: session, principal, taint, recent refusals.
.TP
\fB/etc/aerfs/\fR\fIINSTANCE\fR\fB.env\fR
Flags for the \fBaerfs@.service\fR unit (AERFS_FLAGS, AERFS_UNMOUNT_FLAGS).
`

// manExitStatus is the EXIT STATUS section of the page of command path.
func manExitStatus(path string) string {
	var b strings.Builder
	b.WriteString(".SH EXIT STATUS\n")
	if path == "aerfs run" {
		b.WriteString("The command's own exit status. aerfs run's own failures before the command starts: " +
			"125 (bad flags, refused registration \\- the message names the rule \\-, no mount), " +
			"126 (the command cannot be executed), 127 (the command was not found).\n")
		return b.String()
	}
	for _, e := range exitCodes {
		if strings.HasPrefix(e.meaning, "verify: ") && path != "aerfs verify" && path != "aerfs" {
			continue
		}
		fmt.Fprintf(&b, ".TP\n\\fB%d\\fR\n%s\n", e.code, manEscape(e.meaning))
	}
	return b.String()
}

// manEscape keeps text from being read as troff requests or escapes.
func manEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// addManSections puts EXIT STATUS and FILES into every aerfs page in dir,
// before SEE ALSO, as man-pages(7) orders them.
func addManSections(dir string) error {
	pages, err := filepath.Glob(filepath.Join(dir, "aerfs*.1"))
	if err != nil {
		return err
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		path := strings.ReplaceAll(strings.TrimSuffix(filepath.Base(p), ".1"), "-", " ")
		extra := manExitStatus(path) + ".SH FILES\n" + manFiles
		at := bytes.Index(b, []byte(".SH SEE ALSO"))
		if at < 0 {
			at = len(b)
		}
		out := append(append(append([]byte{}, b[:at]...), extra...), b[at:]...)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writePolicyPage writes aerfs-policy(5) from the default policy file: its
// comments are the documentation of every key.
func writePolicyPage(dir, source string) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH \"AERFS-POLICY\" \"5\" \"\" \"%s\" \"aerfs manual\"\n", source)
	b.WriteString(".SH NAME\naerfs\\-policy, aerfs.yaml \\- the policy file of an aerfs workspace\n")
	b.WriteString(".SH SYNOPSIS\n\\fISTATE\\fR\\fB/aerfs.yaml\\fR\n")
	b.WriteString(".SH DESCRIPTION\nThe policy says which paths of the workspace are guarded (their class), how processes get their principal, " +
		"which taint blocks changes, where sessions may write, and what an authority stamp needs. " +
		"\\fBaerfs init\\fR writes the default below into the state directory; \\fBaerfs policy check FILE\\fR checks an edited one. " +
		"The reading is strict: an unknown key, a misspelt name, a bad pattern or a duplicate key is an error with its line number, " +
		"and a running daemon keeps its old policy rather than load a broken one.\n")
	b.WriteString(".SH THE DEFAULT POLICY\nEvery key, with its default and what it means:\n.PP\n.nf\n.RS 2\n")
	b.WriteString(manEscape(strings.TrimRight(string(configs.DefaultPolicy), "\n")))
	b.WriteString("\n.RE\n.fi\n")
	b.WriteString(".SH FILES\n" + manFiles)
	b.WriteString(".SH SEE ALSO\n\\fBaerfs\\fR(1), \\fBaerfs\\-policy\\fR(1), \\fBaerfs\\-init\\fR(1)\n")
	if err := os.WriteFile(filepath.Join(dir, "aerfs-policy.5"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	// man aerfs.yaml finds the same page, by the file's own name.
	return os.WriteFile(filepath.Join(dir, "aerfs.yaml.5"), []byte(".so man5/aerfs-policy.5\n"), 0o644)
}

// writeMountHelperPage writes mount.fuse.aerfs(8) from the helper's header
// comment.
func writeMountHelperPage(dir, source string) error {
	var lines []string
	for _, l := range strings.Split(string(configs.MountHelper), "\n")[1:] {
		if !strings.HasPrefix(l, "#") {
			break
		}
		lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
	}
	if len(lines) > 0 && strings.HasPrefix(lines[0], "mount.fuse.aerfs") {
		lines = lines[1:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, ".TH \"MOUNT.FUSE.AERFS\" \"8\" \"\" \"%s\" \"aerfs manual\"\n", source)
	b.WriteString(".SH NAME\nmount.fuse.aerfs \\- mount an aerfs workspace with mount(8) or /etc/fstab\n")
	b.WriteString(".SH SYNOPSIS\n\\fBmount \\-t fuse.aerfs\\fR \\fISTATE_DIR\\fR \\fIWORKSPACE\\fR [\\fB\\-o\\fR \\fIOPTIONS\\fR]\n")
	b.WriteString(".SH DESCRIPTION\n.nf\n")
	b.WriteString(manEscape(strings.TrimSpace(strings.Join(lines, "\n"))))
	b.WriteString("\n.fi\n")
	b.WriteString(".SH EXIT STATUS\nThat of \\fBaerfs mount\\fR(1); 1 for a usage error of the helper itself or an unknown option.\n")
	b.WriteString(".SH SEE ALSO\n\\fBaerfs\\-mount\\fR(1), \\fBmount\\fR(8), \\fBfstab\\fR(5)\n")
	return os.WriteFile(filepath.Join(dir, "mount.fuse.aerfs.8"), []byte(b.String()), 0o644)
}
