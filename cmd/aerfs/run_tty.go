package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// # The session's terminal
//
// A session started from the owner's terminal would otherwise hold that
// terminal itself (its descriptors 0, 1 and 2): a process it leaves behind
// after its command returns could draw over what the owner's later
// commands print (a forged `aerfs pending` listing whose ID the owner then
// approves) and read what the owner types. So the confined session gets a
// pseudo-terminal of its own in place of each of those descriptors that is
// the owner's terminal, and aerfs run relays between the two while the
// command runs: the owner's keys to the session (the owner's terminal in
// raw mode, so ^C and ^Z reach the session's terminal and act there), the
// session's output to the owner, the owner's window size to the session.
// When the command returns, aerfs run shows what the session's terminal
// still holds (drainIdle, drainMax) and closes it: whatever is left behind holds a
// terminal that is hung up (its writes fail with EIO, its reads end).
//
// ^C and ^\ on the owner's terminal signal the session's foreground
// processes through its terminal. ^Z stops only what a shell with job
// control runs there: the command leads its terminal's session, and the
// kernel stops no process of an orphaned process group from a terminal (as
// under ssh -t). A command stopped by a signal stops aerfs run too, and
// the owner's shell gets its terminal back; fg continues both.
//
// Without a mount namespace (a kernel that refuses the session a user
// namespace) aerfs run executes the command in its own place and no
// process is left to relay: the session then holds the owner's terminal.

// sessionTTY is a session's pseudo-terminal and its relay.
type sessionTTY struct {
	master *os.File // aerfs run's end
	slave  *os.File // the session's end, for its standard descriptors
	std    [3]bool  // which of descriptors 0-2 were the owner's terminal
	owner  *os.File // where the session's output goes: the owner's terminal
	saved  *unix.Termios
	winch  chan os.Signal
	copied sync.WaitGroup
	// drainEnd: once the command returned, when relaying its output
	// ends at the latest (Unix nanoseconds; 0 before).
	drainEnd atomic.Int64
}

// After the session's command returned, its last output is relayed until
// none came for drainIdle, for drainMax at most: a process it left behind
// can write until then, before the owner's shell prints its prompt, and no
// longer.
const (
	drainIdle = 150 * time.Millisecond
	drainMax  = 2 * time.Second
)

// openSessionTTY makes the session's terminal when one of descriptors 0-2
// is a terminal; nil when none is.
func openSessionTTY() (*sessionTTY, error) {
	t := &sessionTTY{}
	var model int = -1 // the owner's terminal whose mode and size the session's takes
	for fd := 2; fd >= 0; fd-- {
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			t.std[fd], model = true, fd
		}
	}
	if model < 0 {
		return nil, nil
	}
	t.owner = os.Stdout
	if !t.std[1] {
		t.owner = os.Stderr
		if !t.std[2] {
			t.owner = os.Stdin
		}
	}
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var sfd int
	err = control(m, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return err
		}
		// The peer by the master itself, never by a path in /dev/pts.
		r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if e != 0 {
			return e
		}
		sfd = int(r)
		return nil
	})
	if err != nil {
		m.Close()
		return nil, err
	}
	t.master, t.slave = m, os.NewFile(uintptr(sfd), "session terminal")
	if tio, err := unix.IoctlGetTermios(model, unix.TCGETS); err == nil {
		unix.IoctlSetTermios(sfd, unix.TCSETS, tio)
	}
	t.resize()
	return t, nil
}

// control runs f on f's descriptor without putting it in blocking mode.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// stdio is the session's descriptors 0-2: its terminal in place of the
// owner's.
func (t *sessionTTY) stdio() (in, out, errOut *os.File, ctty int) {
	files := [3]*os.File{os.Stdin, os.Stdout, os.Stderr}
	ctty = -1
	for fd := range files {
		if t.std[fd] {
			files[fd] = t.slave
			if ctty < 0 {
				ctty = fd
			}
		}
	}
	return files[0], files[1], files[2], ctty
}

// resize gives the session's terminal the owner's size.
func (t *sessionTTY) resize() {
	for fd := range t.std {
		if !t.std[fd] {
			continue
		}
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			control(t.master, func(m int) error { return unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, ws) })
			return
		}
	}
}

// raw puts the owner's terminal in raw mode when the session reads from
// it, keeping the mode it had to restore.
func (t *sessionTTY) raw() {
	if !t.std[0] {
		return
	}
	tio, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return
	}
	saved := *tio
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Cflag &^= unix.CSIZE | unix.PARENB
	tio.Cflag |= unix.CS8
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(0, unix.TCSETSW, tio) == nil {
		t.saved = &saved
	}
}

// restore gives the owner's terminal back the mode it had.
func (t *sessionTTY) restore() {
	if t.saved != nil {
		unix.IoctlSetTermios(0, unix.TCSETSW, t.saved)
		t.saved = nil
	}
}

// start relays between the terminals once the session's command runs
// (the caller has started it and closed nothing yet).
func (t *sessionTTY) start() {
	t.slave.Close() // the session's alone now
	t.raw()
	t.winch = make(chan os.Signal, 1)
	signal.Notify(t.winch, syscall.SIGWINCH)
	go func() {
		for range t.winch {
			t.resize()
		}
	}()
	if t.std[0] {
		go io.Copy(t.master, os.Stdin)
	}
	t.copied.Add(1)
	go t.relayOutput()
}

// relayOutput copies the session's output to the owner's terminal until
// the session's terminal is closed or, once its command returned
// (drainEnd set), quiet for drainIdle or drained for drainMax. A write the
// owner's terminal refuses loses that output, not the session's progress.
func (t *sessionTTY) relayOutput() {
	defer t.copied.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.owner.Write(buf[:n])
			if end := t.drainEnd.Load(); end != 0 {
				t.master.SetReadDeadline(time.Unix(0, min(time.Now().Add(drainIdle).UnixNano(), end)))
			}
		}
		if err != nil {
			return
		}
	}
}

// suspend gives the owner's terminal back while the session's command is
// stopped, stops aerfs run with sig, and takes the terminal again when
// aerfs run is continued.
func (t *sessionTTY) suspend(sig syscall.Signal) {
	t.restore()
	unix.Kill(unix.Getpid(), sig)
	t.raw()
	t.resize()
}

// stop relays what the session's terminal still holds, for a moment, and
// hangs it up: anything the session left behind holds a dead terminal.
func (t *sessionTTY) stop() {
	signal.Stop(t.winch)
	now := time.Now()
	t.drainEnd.Store(now.Add(drainMax).UnixNano())
	t.master.SetReadDeadline(now.Add(drainIdle))
	t.copied.Wait()
	t.master.Close()
	t.restore()
}

// waitStopping waits for the session's command pid like cmd.Wait, and
// while it is stopped by a signal stops aerfs run too (tty.suspend), then
// continues it.
func waitStopping(pid int, tty *sessionTTY) (syscall.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WUNTRACED, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if ws.Stopped() {
			tty.suspend(syscall.SIGTSTP)
			unix.Kill(-pid, unix.SIGCONT)
			unix.Kill(pid, unix.SIGCONT)
			continue
		}
		return syscall.WaitStatus(ws), nil
	}
}
