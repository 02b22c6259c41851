// Package sandbox confines an aerfs session before `aerfs run` executes its
// command: Landlock keeps its writes inside the workspace and the paths the
// policy declares writable, keeps its reads out of the state directory, and
// scopes signals, abstract UNIX sockets and ptrace to the session; a seccomp
// filter under no_new_privs refuses the system calls that reach other
// processes or change the mount table (docs/confinement.md).
//
// Everything here acts on the calling thread only, which must be locked
// (runtime.LockOSThread) and must call execve next: the new program keeps
// the thread's Landlock domain, seccomp filter and no_new_privs, and so does
// everything it starts.
package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Config says what a session may reach.
type Config struct {
	// Workspace is the aerfs mount the session works in: read, write,
	// create and remove beneath it (aerfs itself decides each change).
	Workspace string
	// Writable are further absolute paths the session may change (from
	// the policy's sandbox.writable, ~ expanded). Missing ones are skipped.
	Writable []string
	// Hidden are absolute paths the session may neither read nor change
	// (the state directory).
	Hidden []string
	// NoLandlock and NoSeccomp leave a layer out (for tests of the
	// other layer; `aerfs run` applies both).
	NoLandlock, NoSeccomp bool
	// SuperviseConnect installs the filter that hands every connect() to
	// the daemon (unotify.go); Report.Listener is its listener.
	SuperviseConnect bool
}

// Report says what was applied, for the register request and `aerfs status`.
type Report struct {
	LandlockABI int      `json:"landlock_abi"` // 0: Landlock unavailable
	Landlock    bool     `json:"landlock"`
	Scoped      []string `json:"scoped,omitempty"`   // signal, abstract_unix_socket
	Writable    []string `json:"writable,omitempty"` // the write rules added
	Hidden      []string `json:"hidden,omitempty"`   // paths kept out of reads
	Private     []string `json:"private,omitempty"`  // paths replaced in the session's mount namespace
	Namespaces  []string `json:"namespaces,omitempty"`
	NoNewPrivs  bool     `json:"no_new_privs"`
	NoCaps      bool     `json:"no_capabilities"` // every capability set emptied, securebits locked
	Sockets     bool     `json:"sockets"`         // every connect() decided by the daemon
	Listener    int      `json:"-"`               // the connect() listener, for the daemon (-1: none)
	Seccomp     bool     `json:"seccomp"`
	Warnings    []string `json:"warnings,omitempty"`
}

// String is a one-line summary such as
// "landlock abi 7 (scoped signal,abstract_unix_socket), seccomp, no_new_privs".
func (r *Report) String() string {
	var parts []string
	if r.Landlock {
		s := fmt.Sprintf("landlock abi %d", r.LandlockABI)
		if len(r.Scoped) > 0 {
			s += " (scoped " + strings.Join(r.Scoped, ",") + ")"
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "no landlock")
	}
	if len(r.Private) > 0 {
		parts = append(parts, "mount namespace (private "+strings.Join(r.Private, " ")+")")
	}
	if r.Seccomp {
		parts = append(parts, "seccomp")
	}
	if r.NoNewPrivs {
		parts = append(parts, "no_new_privs")
	}
	if r.NoCaps {
		parts = append(parts, "no capabilities")
	}
	if r.Sockets {
		parts = append(parts, "sockets via the daemon")
	}
	return strings.Join(parts, ", ")
}

// Summary is String with the rules: the paths the session may change and
// the paths kept out of its reads, e.g. "landlock abi 7 (scoped signal),
// writes /ws /tmp, hidden /state, user+mount namespaces (private
// /run/user/1000), seccomp, no_new_privs".
func (r *Report) Summary() string {
	var parts []string
	if r.Landlock {
		s := fmt.Sprintf("landlock abi %d", r.LandlockABI)
		if len(r.Scoped) > 0 {
			s += " (scoped " + strings.Join(r.Scoped, ",") + ")"
		}
		parts = append(parts, s)
		if len(r.Writable) > 0 {
			parts = append(parts, "writes "+strings.Join(r.Writable, " "))
		}
		if len(r.Hidden) > 0 {
			parts = append(parts, "hidden "+strings.Join(r.Hidden, " "))
		}
	} else {
		parts = append(parts, "no landlock")
	}
	if len(r.Namespaces) > 0 {
		s := strings.Join(r.Namespaces, "+") + " namespaces"
		if len(r.Private) > 0 {
			s += " (private " + strings.Join(r.Private, " ") + ")"
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "no namespaces")
	}
	if r.Seccomp {
		parts = append(parts, "seccomp")
	}
	if r.NoNewPrivs {
		parts = append(parts, "no_new_privs")
	}
	if r.NoCaps {
		parts = append(parts, "no capabilities")
	}
	if r.Sockets {
		parts = append(parts, "sockets via the daemon")
	}
	return strings.Join(parts, ", ")
}

// DeviceFiles are the device paths ordinary programs write or drive with
// ioctls: terminals, the null devices, POSIX shared memory.
var DeviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/ptmx", "/dev/shm"}

// Apply confines the calling thread. It fails closed: an error means the
// caller must not execute the session's command. Landlock missing from the
// kernel is not an error (the report says so); Landlock present but
// failing is.
func Apply(c Config) (*Report, error) {
	r := &Report{Listener: -1}
	if !filepath.IsAbs(c.Workspace) {
		return r, fmt.Errorf("workspace %q is not absolute", c.Workspace)
	}
	if err := setNoNewPrivs(); err != nil {
		return r, fmt.Errorf("no_new_privs: %w", err)
	}
	r.NoNewPrivs = true
	w, err := dropCapabilities()
	if err != nil {
		return r, fmt.Errorf("capabilities: %w", err)
	}
	if w != "" {
		r.Warnings = append(r.Warnings, w)
	}
	r.NoCaps = w == ""
	if !c.NoLandlock {
		if err := applyLandlock(c, r); err != nil {
			return r, fmt.Errorf("landlock: %w", err)
		}
	}
	if c.SuperviseConnect {
		// Before the main filter, which refuses any further listener.
		fd, err := InstallConnectNotify()
		if err != nil {
			return r, fmt.Errorf("seccomp connect supervision: %w", err)
		}
		r.Listener, r.Sockets = fd, true
	}
	if !c.NoSeccomp {
		if err := applySeccomp(r); err != nil {
			return r, fmt.Errorf("seccomp: %w", err)
		}
	}
	return r, nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
