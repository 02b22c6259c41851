package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newUnmountCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "unmount WORKSPACE",
		Short: "Unmount aerfs from the workspace; the daemon records it and exits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUnmount(args[0])
		},
	}
}

func runUnmount(wsArg string) error {
	ws, err := filepath.Abs(wsArg)
	if err != nil {
		return err
	}
	m := daemon.FindMount(ws)
	if m == nil || m.Mountpoint != ws {
		return fail(exitNotMounted, "aerfs status lists what is mounted", "%s is not an aerfs mount", ws)
	}
	pid := 0
	if resp, err := daemon.Call(m.StateDir, daemon.Request{Op: "status"}); err == nil && resp.OK {
		var st daemon.Status
		if json.Unmarshal(resp.Data, &st) == nil {
			pid = st.PID
		}
	}
	var last error
	for i := 0; i < 50; i++ {
		if last = syscall.Unmount(ws, 0); last == nil {
			break
		}
		if last == syscall.EPERM {
			// Not root: the owner of a FUSE mount unmounts it through
			// the setuid helper.
			if last = fusermountUnmount(ws); last == nil || !strings.Contains(last.Error(), "busy") {
				break
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if last != syscall.EBUSY {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		return fail(exitError, "a process still uses the workspace (fuser -m "+ws+")", "unmount %s: %v", ws, last)
	}
	// Wait for the daemon to record the unmount and release its log.
	// A loaded machine can take a while; a later mount needs the log.
	for i := 0; pid > 0 && syscall.Kill(pid, 0) == nil; i++ {
		if i == 1200 {
			return fail(exitError, "kill it once it has recorded the unmount, or wait and check aerfs status",
				"unmounted %s, but daemon pid %d is still running after 30 s", ws, pid)
		}
		time.Sleep(25 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "aerfs: unmounted %s\n", ws)
	return nil
}

// fusermountUnmount unmounts ws with fusermount3 -u (or fusermount -u),
// which lets the user who mounted a FUSE file system unmount it.
func fusermountUnmount(ws string) error {
	helper, err := exec.LookPath("fusermount3")
	if err != nil {
		if helper, err = exec.LookPath("fusermount"); err != nil {
			return fmt.Errorf("%w (and neither fusermount3 nor fusermount is installed: apt-get install fuse3)", syscall.EPERM)
		}
	}
	out, err := exec.Command(helper, "-u", ws).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -u: %s", filepath.Base(helper), strings.TrimSpace(string(out)))
	}
	return nil
}
