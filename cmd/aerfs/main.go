// Command aerfs guards an AI agent's workspace: it mounts a FUSE filesystem
// over the workspace and decides every write to the agent's memory,
// identity and configuration files from who writes and what they have read.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

// Exit codes. They are part of the interface: scripts rely on them.
const (
	exitOK          = 0
	exitError       = 1  // anything not listed below
	exitUsage       = 2  // bad flags or arguments
	exitPolicy      = 3  // the policy file is invalid
	exitRefused     = 4  // the request was refused by the policy
	exitNotMounted  = 5  // no aerfs mount or daemon for the workspace
	exitNoWorkspace = 6  // the workspace does not exist or is not a directory
	exitIntegrity   = 10 // verify: records, blobs or proofs do not match
	exitSchema      = 11 // verify: a file does not follow the format
	exitSignature   = 12 // verify: the checkpoint signature does not verify
	exitIO          = 13 // verify: the bundle or log cannot be read
	exitUnpinned    = 14 // verify: integrity verified, origin not (no --key)
)

// cliError is an error with an exit code and an optional hint for the user.
type cliError struct {
	code int
	msg  string
	hint string
}

func (e *cliError) Error() string { return e.msg }

func fail(code int, hint, format string, args ...any) error {
	return &cliError{code: code, msg: fmt.Sprintf(format, args...), hint: hint}
}

type globalOptions struct {
	workspace string
	state     string
	quiet     bool // no progress bars
	verbose   bool // what a command can say beyond its result
}

var gopts globalOptions

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "aerfs",
		Short: "Guard an AI agent's memory files with a FUSE mount over its workspace",
		Long: `aerfs mounts over an agent's workspace and decides every change to its
identity, memory and control files (SOUL.md, MEMORY.md, CLAUDE.md, skills …)
from which process writes and what it has read, never from the bytes.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().StringVar(&gopts.workspace, "workspace", "", "the workspace (default: the aerfs mount containing the current directory)")
	root.PersistentFlags().StringVar(&gopts.state, "state", "", "the state directory (default: found from the workspace)")
	root.PersistentFlags().BoolVarP(&gopts.quiet, "quiet", "q", false, "draw no progress bar (none is drawn when standard error is not a terminal)")
	root.PersistentFlags().BoolVar(&gopts.verbose, "verbose", false, "say more where a command has more to say (verify: every count; export and report: what each step took)")
	root.AddCommand(
		newInitCommand(), newMountCommand(), newUnmountCommand(), newRunCommand(),
		newStatusCommand(), newListCommand(), newLogCommand(), newTaintCommand(), newPromoteCommand(), newAuthorityCommand(), newAuthorizeCommand(), newAttestCommand(),
		newPolicyCommand(), newKeyCommand(), newExportCommand(), newVerifyCommand(), newProveCommand(),
		newHistoryCommand(), newDiffCommand(), newScopeCommand(), newPendingCommand(), newSnapshotCommand(),
		newRestoreCommand(), newApproveCommand(), newRejectCommand(), newVersionCommand(),
		newWatchCommand(), newReportCommand(), newGCCommand(),
		newSessionCommand(), newWhyCommand(), newEditCommand(), newAdoptCommand(), newDebugCommand(),
	)
	root.AddCommand(newManCommand(root), newOwnerReadCommand())
	// cobra would add completion and help when it runs; make them now so
	// that they get their examples too.
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	addExamples(root)
	addCompletions(root)
	addUsageHints(root)
	// --version prints what `aerfs version` prints.
	root.Version = buildVersion().Version
	root.SetVersionTemplate(buildVersion().String())
	return root
}

func main() {
	root := newRootCommand()
	root.SetFlagErrorFunc(flagError)
	flush := printableOutput(root)
	err := execute(root)
	flush()
	os.Exit(report(err))
}

// execute runs the command line. A usage error cobra finds after it has
// chosen the command (a required flag not given) gets the exit code and
// the hint of every other usage error, naming that command's help.
func execute(root *cobra.Command) error {
	c, err := root.ExecuteC()
	if err != nil && strings.HasPrefix(err.Error(), "required flag(s) ") {
		return &cliError{code: exitUsage, msg: err.Error(), hint: "see '" + c.CommandPath() + " --help'"}
	}
	return err
}

// flagError makes a bad flag a usage error with a hint.
func flagError(c *cobra.Command, err error) error {
	return &cliError{code: exitUsage, msg: err.Error(), hint: "see '" + c.CommandPath() + " --help'"}
}

// report prints err in the one voice users see and returns the exit code.
func report(err error) int {
	if err == nil {
		return exitOK
	}
	var eo *exitOnly
	if errors.As(err, &eo) {
		return eo.code
	}
	code, hint := exitError, ""
	var ce *cliError
	var pe *policy.Error
	switch {
	case errors.As(err, &ce):
		code, hint = ce.code, ce.hint
	case errors.As(err, &pe):
		code, hint = exitPolicy, pe.Hint
	default:
		if k := evidence.KindOf(err); k != 0 {
			code = verifyExit(k)
		} else if isUsage(err) {
			code, hint = exitUsage, "'aerfs --help' lists the commands, 'aerfs CMD --help' a command's flags"
		}
	}
	// An error may name what a session chose (a path, a session's
	// report): one line, escaped.
	fmt.Fprintf(os.Stderr, "aerfs: %s\n", line(err.Error()))
	if hint != "" {
		fmt.Fprintf(os.Stderr, "hint: %s\n", line(hint))
	}
	return code
}
