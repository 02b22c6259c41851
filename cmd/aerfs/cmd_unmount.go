package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
		return fail(exitNotMounted, "aerfs list lists what is mounted", "%s is not an aerfs mount", ws)
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
	// Wait for the daemon to record the unmount and release its log. It
	// leaves as soon as the mount is gone here, even when mount
	// namespaces of other sessions hold copies of it (it aborts the FUSE
	// connection then), and its flush covers only what aerfs wrote.
	for i := 0; pid > 0 && running(pid); i++ {
		if i == 400 {
			return fail(exitError, fmt.Sprintf("its log says why (aerfs log needs it gone: sudo tail %s); "+
				"let it go: sudo kill -TERM %d; if copies of the mount in other mount namespaces hold it: "+
				"sudo sh -c 'mount -t fusectl none /sys/fs/fuse/connections; echo 1 > /sys/fs/fuse/connections/%d/abort'; "+
				"last resort: sudo kill -KILL %d (the next mount completes what it recorded)",
				filepath.Join(m.StateDir, "daemon.log"), pid, m.Conn, pid),
				"unmounted %s, but its daemon (pid %d) is still running after 10 s", ws, pid)
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

// running reports whether process pid runs: a daemon that has exited but
// is not reaped yet (a zombie, until init gets to it) has left.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
