// Package daemon runs an aerfs mount: it opens the backing directory, loads
// the policy, mounts the guarded loopback over the workspace and serves the
// control socket.
//
// # Control socket
//
// A Unix stream socket (SocketPath: under /run/aerfs for a root daemon,
// whose state directory is its own; in the state directory otherwise), mode
// 0666: any local process
// may ask, and each request is authorised by the peer credentials the
// kernel attaches to the connection, SO_PEERCRED, never by anything in the
// request). Requests and answers are one JSON object per line.
package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// SocketName is the control socket's file name: inside the state directory
// of a daemon running as the owner, under /run/aerfs for a root daemon
// (SocketPath).
const SocketName = "control.sock"

// Request is one control request.
type Request struct {
	Op        string `json:"op"` // register, confined, taint, status, promote, ping, snapshot, restore, approve, reject
	Principal string `json:"principal,omitempty"`
	Session   string `json:"session,omitempty"`
	Resume    bool   `json:"resume,omitempty"`  // register: the owner rejoins an existing session
	All       bool   `json:"all,omitempty"`     // session-list: the ended sessions too
	Sandbox   string `json:"sandbox,omitempty"` // register: the confinement aerfs run applies ("off": none); confined: its JSON report
	Agent     string `json:"agent,omitempty"`   // register: the agent client the session runs (aerfs run --agent)
	// register: the session's network ("proxy": a namespace of its own,
	// "open", or "" for a session started from within one) and the model
	// endpoints its client was started with (host:port); confined: what
	// each descriptor sent with the request is ("proxy ADDR", "forward ADDR")
	Network   string   `json:"network,omitempty"`
	Model     []string `json:"model,omitempty"`
	Listeners []string `json:"listeners,omitempty"`
	Flags     []string `json:"flags,omitempty"`
	Path      string   `json:"path,omitempty"`
	PathB64   string   `json:"path_b64,omitempty"` // Path's bytes in standard base64 when they are not UTF-8
	Label     string   `json:"label,omitempty"`
	// restore
	To             string `json:"to,omitempty"`       // a version of Path (record id prefix or number)
	Snapshot       string `json:"snapshot,omitempty"` // a snapshot id (prefix)
	Before         string `json:"before,omitempty"`   // RFC 3339 time
	ContaminatedBy string `json:"contaminated_by,omitempty"`
	SourceVersion  string `json:"source_version,omitempty"` // with ContaminatedBy: one version (content SHA-256 or prefix) of that path
	DryRun         bool   `json:"dry_run,omitempty"`
	Yes            bool   `json:"yes,omitempty"` // the owner confirms a plan that goes beyond what was named
	// approve, reject
	ID string `json:"id,omitempty"`
	// authorize, authority-check (daemon/authority.go)
	For   string `json:"for,omitempty"`
	TTL   string `json:"ttl,omitempty"`
	Token string `json:"token,omitempty"`
	// gc: the retention
	KeepLast   int    `json:"keep_last,omitempty"`
	KeepWithin string `json:"keep_within,omitempty"` // a Go duration
	MaxBytes   int64  `json:"max_bytes,omitempty"`
	// edit (session_requests.go): the new content and the version it replaces
	Content  []byte `json:"content,omitempty"`
	BaseHash string `json:"base_hash,omitempty"`
	// read (ownerread.go): the command that reads the state directory
	// and its arguments, as the owner typed them
	Args []string `json:"args,omitempty"`
	// pprof (pprof.go): the profile, and how many seconds a cpu profile runs
	Profile string `json:"profile,omitempty"`
	Seconds int    `json:"seconds,omitempty"`
}

// Response answers a Request.
type Response struct {
	OK      bool            `json:"ok"`
	Error   string          `json:"error,omitempty"`
	Hint    string          `json:"hint,omitempty"`
	Refused bool            `json:"refused,omitempty"` // a policy refusal, not a failure
	Rule    string          `json:"rule,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Status is what `aerfs status` prints.
type Status struct {
	Workspace  string    `json:"workspace"`
	StateDir   string    `json:"state_dir"`
	Policy     string    `json:"policy"`
	PID        int       `json:"pid"`
	Started    time.Time `json:"started"`
	ProcEvents bool      `json:"process_events"`
	// CachedCallers: how a caller resolved before is checked at its next
	// request: "process events" (no /proc read) or "/proc".
	CachedCallers string `json:"cached_callers"`
	Tracking      string `json:"session_tracking"` // "cgroup" or "ancestry (weaker: …)"
	// The evidence log: whether its last append succeeded, and the last
	// error it gave (guarded changes are refused while it fails).
	LogHealthy bool `json:"log_healthy"`
	// The aerfs version serving the mount, and the FUSE protocol the
	// kernel offered it (major.minor).
	Version      string    `json:"version,omitempty"`
	FUSEProtocol string    `json:"fuse_protocol,omitempty"`
	LogLastError string    `json:"log_last_error,omitempty"`
	LogLastErrAt time.Time `json:"log_last_error_at,omitempty"`
	// Allowed … Quarantined count since the daemon started (Started).
	Passthrough bool            `json:"passthrough"`
	Labels      int             `json:"labels"`
	Allowed     int64           `json:"allowed"`
	Denied      int64           `json:"denied"`
	Committed   int64           `json:"committed"`
	Quarantined int64           `json:"quarantined"`
	Sessions    []SessionStatus `json:"sessions"`
	// Roots are the further guarded roots: "@name" → directory.
	Roots map[string]string `json:"roots,omitempty"`
	// SessionWritable are the places outside the mount a confined
	// session may write (sandbox.writable and sandbox.private, "~" the
	// workspace owner's home): the owner's tools keep nothing of theirs
	// there (aerfs restore --set-aside).
	SessionWritable []string `json:"session_writable,omitempty"`
	// PolicyHeld: files the policy in force would guard, held out of its
	// guarded classes while they are open for writing through a plain
	// descriptor (RW-open-writer); guarded once closed.
	PolicyHeld []string `json:"policy_held,omitempty"`
	// Drift: guarded files changed outside the mount, found since the
	// daemon started (at mount: while unmounted); the first ones, and
	// how many in all (aerfs log --type drift lists every one).
	Drift      []DriftStatus `json:"drift,omitempty"`
	DriftCount int           `json:"drift_count,omitempty"`
	// StateMode is "daemon" (root-owned 0700, Socket outside it) or
	// "owner" (rootless: sessions kept out by confinement).
	StateMode string `json:"state_mode,omitempty"`
	Socket    string `json:"socket,omitempty"`
}

// DriftStatus is a guarded file found changed outside the mount: when
// ("unmounted": found at mount; "mounted": by the watcher), and whether
// the policy's on_drift: restore put the committed version back.
type DriftStatus struct {
	Path     string    `json:"path"`
	When     string    `json:"when"`
	At       time.Time `json:"at"`
	Restored bool      `json:"restored,omitempty"`
}

// SessionStatus describes one session.
type SessionStatus struct {
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	Taint     []string  `json:"taint"`
	Started   time.Time `json:"started"`
	Live      int       `json:"live_processes"`
	// Quarantined: a burst of refusals; every mutation is refused.
	Quarantined bool `json:"quarantined"`
	// Confinement is what aerfs run applied to the session, as it
	// reported it and /proc shows it, or "unconfined (--sandbox=off)".
	Confinement string `json:"confinement,omitempty"`
	// Network is how the session reaches the network (its proxy, or
	// open and why); Hosts what it reached through the proxy.
	Network string    `json:"network,omitempty"`
	Hosts   []NetHost `json:"hosts,omitempty"`
}

// Call sends one request to the daemon serving stateDir.
func Call(stateDir string, req Request) (*Response, error) {
	// A connection over the daemon's limits is answered at once with an
	// error: busy, not refused. Try again for a few seconds (many sessions
	// starting together), with a growing pause.
	delay := 10 * time.Millisecond
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := call1(stateDir, req)
		if err != nil || resp.OK || !strings.HasPrefix(resp.Error, "too many control connections") || time.Now().After(deadline) {
			return resp, err
		}
		time.Sleep(delay)
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// CallFiles is Call with descriptors sent along the request (SCM_RIGHTS).
func CallFiles(stateDir string, req Request, files []*os.File) (*Response, error) {
	return call1(stateDir, req, files...)
}

func call1(stateDir string, req Request, files ...*os.File) (*Response, error) {
	c, err := net.DialTimeout("unix", SocketPath(stateDir), 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the aerfs daemon: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	line = append(line, '\n')
	if len(files) > 0 {
		// The descriptors travel with the line's first bytes.
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		n, _, err := c.(*net.UnixConn).WriteMsgUnix(line, syscall.UnixRights(fds...), nil)
		if err != nil {
			return nil, err
		}
		line = line[n:]
	}
	if len(line) > 0 {
		if _, err := c.Write(line); err != nil {
			return nil, err
		}
	}
	var resp Response
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	if !sc.Scan() {
		if sc.Err() != nil {
			return nil, sc.Err()
		}
		return nil, fmt.Errorf("the aerfs daemon closed the connection")
	}
	if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
