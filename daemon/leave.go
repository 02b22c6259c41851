package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/internal/mountinfo"
)

// # Leaving
//
// Every mount namespace made while a workspace is mounted holds a copy of
// its mount: the confined sessions of every other workspace (aerfs run
// makes one per session), containers, anything started with unshare. The
// kernel keeps a FUSE connection open while any copy is mounted, and a
// copy in a less privileged namespace is locked: it never follows the
// host's unmount, whatever the propagation of / (private on hosts without
// systemd, in containers). Waiting for the connection to end would keep
// the daemon, and its log, until the last of those sessions ends.
//
// So the daemon leaves on the right condition, which is its own: its mount
// is gone from the mount namespace it mounted in (aerfs unmount,
// fusermount -u, umount, a signal). It gives the kernel a moment to end
// the connection, then aborts it through the FUSE control file system
// (/sys/fs/fuse/connections/<device>/abort): the copies left in other
// namespaces answer ENOTCONN from then on, and nothing is served through
// them by a daemon that has unmounted. A daemon that cannot abort (a
// rootless one where fusectl is not mounted) says so in its log, with the
// command that lets it go.

// servedMount is one FUSE mount this daemon serves.
type servedMount struct {
	dir    string
	id     int    // its id in the daemon's mount table
	conn   uint32 // its FUSE connection: the device number of the mount
	server *fuse.Server
	done   chan struct{} // closed when the server's loops have ended
}

// newServedMount finds the mount srv serves at dir from stateDir in the
// mount table (the innermost one there) and starts waiting for its end.
func newServedMount(dir, stateDir string, srv *fuse.Server) (*servedMount, error) {
	ms, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	x, ok := servedIn(ms, dir, stateDir)
	if !ok {
		return nil, fmt.Errorf("%s is not in the mount table", dir)
	}
	m := &servedMount{dir: dir, id: x.ID, conn: x.Major<<20 | x.Minor, server: srv, done: make(chan struct{})}
	go func() {
		srv.Wait()
		close(m.done)
	}()
	return m, nil
}

// servedIn is the innermost mount in ms that aerfs serves at dir from
// stateDir.
func servedIn(ms []mountinfo.Mount, dir, stateDir string) (m mountinfo.Mount, ok bool) {
	for _, x := range ms {
		if x.Point == dir && x.FSType == "fuse.aerfs" && x.Source == stateDir {
			m, ok = x, true
		}
	}
	return m, ok
}

// present reports whether the mount is still in the daemon's mount table.
func (m *servedMount) present() bool {
	ms, err := mountinfo.Self()
	if err != nil {
		return true // cannot tell: never leave on a doubt
	}
	for _, x := range ms {
		if x.ID == m.id && x.Point == m.dir {
			return true
		}
	}
	return false
}

// gone returns a channel closed once the mount has left the daemon's mount
// table. The kernel signals every change of the table to poll(2) on
// /proc/self/mountinfo; the table is read again after each, and once a
// second in any case.
func (m *servedMount) gone(ctx context.Context) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		defer close(c)
		f, err := os.Open("/proc/self/mountinfo")
		if err == nil {
			defer f.Close()
		}
		for ctx.Err() == nil {
			if !m.present() {
				return
			}
			select {
			case <-m.done:
				return
			default:
			}
			if f != nil {
				fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI | unix.POLLERR}}
				unix.Poll(fds, 1000)
			} else {
				time.Sleep(time.Second)
			}
		}
	}()
	return c
}

// errBusy is returned by leave when the mount is in use here and was not to
// be detached.
var errBusy = errors.New("the mount is busy")

// leave ends the serving of m. Unless it is gone already, it unmounts it
// here (lazily when detach is set and it is busy; a busy mount otherwise
// stays, errBusy). Then it waits a moment for the kernel to end the
// connection, and aborts it when copies in other mount namespaces keep it
// open. It returns once the server's loops have ended, or an error that
// says why the daemon cannot leave.
func (m *servedMount) leave(detach bool, log zerolog.Logger) error {
	if m.present() {
		if err := m.unmount(detach); err != nil {
			return err
		}
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(300 * time.Millisecond):
	}
	// Other mount namespaces hold copies of the mount.
	log.Info().Str("path", m.dir).Uint32("connection", m.conn).
		Msg("unmounted here; copies in other mount namespaces keep the FUSE connection open: aborting it")
	if err := abortConnection(m.conn); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s is unmounted, but copies of its mount in other mount namespaces (sessions of other workspaces, containers) keep its FUSE connection open and it cannot be aborted: %w; as root: mount -t fusectl none /sys/fs/fuse/connections; echo 1 > /sys/fs/fuse/connections/%d/abort", m.dir, err, m.conn)
	}
	// A connection missing from the control file system has ended between
	// the wait above and the abort (the last copy went away): its loops end
	// as an aborted one's do.
	select {
	case <-m.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("the FUSE connection of %s was aborted, but its requests have not ended after 5 s", m.dir)
	}
}

// unmount unmounts m in the daemon's namespace: directly as root, through
// fusermount3 -u as the owner; retried for a while when busy.
func (m *servedMount) unmount(detach bool) error {
	var err error
	for i := 0; i < 20; i++ {
		if os.Geteuid() == 0 {
			err = unix.Unmount(m.dir, 0)
		} else {
			err = fusermountUnmount(m.dir, false)
		}
		if err == nil || !m.present() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !detach {
		return fmt.Errorf("%w: %v", errBusy, err)
	}
	if os.Geteuid() == 0 {
		err = unix.Unmount(m.dir, unix.MNT_DETACH)
	} else {
		err = fusermountUnmount(m.dir, true)
	}
	if err != nil && m.present() {
		return fmt.Errorf("cannot detach %s: %w", m.dir, err)
	}
	return nil
}

// fusermountUnmount unmounts dir with the setuid helper (lazily with lazy).
func fusermountUnmount(dir string, lazy bool) error {
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	var last error = errors.New("neither fusermount3 nor fusermount is installed")
	for _, h := range []string{"fusermount3", "fusermount"} {
		p, err := exec.LookPath(h)
		if err != nil {
			continue
		}
		out, err := exec.Command(p, append(args, dir)...).CombinedOutput()
		if err == nil {
			return nil
		}
		last = fmt.Errorf("%s: %v: %s", h, err, out)
	}
	return last
}

// fusectl is where the FUSE control file system is usually mounted.
const fusectl = "/sys/fs/fuse/connections"

// abortConnection aborts the FUSE connection conn. Where the control file
// system is not mounted, a root daemon mounts it in a mount namespace of
// one thread of its own (nothing appears in the host's table).
func abortConnection(conn uint32) error {
	name := strconv.FormatUint(uint64(conn), 10)
	err := writeAbort(filepath.Join(fusectl, name, "abort"))
	if err == nil || os.Geteuid() != 0 {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		// The thread ends with the goroutine: it is never unlocked, so
		// its private namespace is never reused by the runtime.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("fusectl", fusectl, "fusectl", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			errc <- fmt.Errorf("mount fusectl: %w", err)
			return
		}
		errc <- writeAbort(filepath.Join(fusectl, name, "abort"))
	}()
	return <-errc
}

func writeAbort(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("1")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
