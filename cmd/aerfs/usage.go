package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// # Usage errors
//
// A command given the wrong arguments, an unknown command, or aerfs with no
// command at all is a usage error: exit 2, and a hint that names the help
// to read. cobra's own errors carry no hint, so every command's argument
// check is wrapped here, once, for the whole tree.

// addUsageHints wraps the argument check of every command below root so
// that its errors are usage errors with a hint, and makes a bare "aerfs"
// (and a bare command group such as "aerfs session") a usage error rather
// than a help page that exits 0.
func addUsageHints(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if check := c.Args; check != nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					return &cliError{code: exitUsage, msg: err.Error(), hint: "see '" + cmd.CommandPath() + " --help'"}
				}
				return nil
			}
		}
		if c.Run == nil && c.RunE == nil && c.HasSubCommands() {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return &cliError{code: exitUsage, msg: "unknown command \"" + args[0] + "\" for \"" + cmd.CommandPath() + "\"" + suggest(cmd, args[0]),
						hint: "'" + cmd.CommandPath() + " --help' lists the commands"}
				}
				cmd.SetOut(cmd.ErrOrStderr())
				cmd.Usage()
				return &cliError{code: exitUsage, msg: "a command is needed", hint: "'" + cmd.CommandPath() + " --help' lists the commands"}
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// suggest is cobra's "did you mean" for an unknown subcommand, on one line.
func suggest(c *cobra.Command, arg string) string {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	s := c.SuggestionsFor(arg)
	if len(s) == 0 {
		return ""
	}
	return " (did you mean " + strings.Join(s, ", ") + "?)"
}
