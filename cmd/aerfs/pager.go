package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// # A pager for long output, as git does it
//
// log and diff page their output when standard output is a terminal:
// through $AERFS_PAGER, else $PAGER, else less (with LESS=FRX when LESS is
// unset: it quits at once on a screen's worth, keeps colour, and leaves
// the text on the screen). An empty pager or "cat", --no-pager, --follow
// and a standard output that is not a terminal mean no pager.

// pagedCommands are the commands whose output is paged.
var pagedCommands = map[string]bool{"aerfs log": true, "aerfs diff": true}

// pagerCommand is the pager to run, "" for none.
func pagerCommand() string {
	p, ok := os.LookupEnv("AERFS_PAGER")
	if !ok {
		p, ok = os.LookupEnv("PAGER")
	}
	if !ok {
		p = "less"
	}
	if p == "cat" {
		return ""
	}
	return p
}

// pager is a running pager reading what the command prints.
type pager struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	gone bool
}

// startPager starts the pager with the terminal as its output.
func startPager(command string) (*pager, error) {
	c := exec.Command("/bin/sh", "-c", command)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	c.Env = os.Environ()
	if _, ok := os.LookupEnv("LESS"); !ok {
		c.Env = append(c.Env, "LESS=FRX")
	}
	if _, ok := os.LookupEnv("LV"); !ok {
		c.Env = append(c.Env, "LV=-c")
	}
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	// Ctrl-C is the pager's: it must not end aerfs and leave the pager
	// reading a closed pipe with the shell's prompt beside it.
	signal.Ignore(os.Interrupt)
	return &pager{cmd: c, in: in}, nil
}

// Write passes output to the pager. When the reader has quit (q in less),
// there is nobody to print for: aerfs waits for the pager and exits, as
// git does.
func (p *pager) Write(b []byte) (int, error) {
	n, err := p.in.Write(b)
	if err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)) {
		p.close()
		os.Exit(exitOK)
	}
	return n, err
}

// close ends the pager's input and waits for the reader to quit it.
func (p *pager) close() {
	if p.gone {
		return
	}
	p.gone = true
	p.in.Close()
	p.cmd.Wait()
}
