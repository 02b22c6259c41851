package daemon

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	aerfs "github.com/aerfs/aerfs/fs"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

type controlServer struct {
	m        *aerfs.Monitor
	stateDir string
	reg      *principal.Registry
	log      zerolog.Logger
	status   func() Status
	ln       *net.UnixListener
	wg       sync.WaitGroup
}

func (s *controlServer) listen(path string) error {
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	// Anyone may ask; every request is authorised by its peer credentials.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return err
	}
	s.ln = ln
	return nil
}

func (s *controlServer) close() {
	s.ln.Close()
	s.wg.Wait()
}

func (s *controlServer) serve() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.handleConn(c)
		}()
	}
}

func peerPid(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

func (s *controlServer) handleConn(c *net.UnixConn) {
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), 64<<10)
	if !sc.Scan() {
		return
	}
	var resp *Response
	var req Request
	dec := json.NewDecoder(strings.NewReader(sc.Text()))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil && req.PathB64 != "" {
		err = fmt.Errorf("both path and path_b64")
		if b, derr := base64.StdEncoding.DecodeString(req.PathB64); derr != nil {
			err = derr
		} else if req.Path == "" {
			req.Path, err = string(b), nil
		}
	}
	if err != nil {
		resp = &Response{Error: "malformed request: " + err.Error()}
	} else if pid, err := peerPid(c); err != nil || pid <= 0 {
		resp = &Response{Error: "cannot identify the requesting process", Hint: "requests must come over the local socket from a live process"}
	} else {
		resp = s.handle(pid, req)
	}
	b, _ := json.Marshal(resp)
	c.Write(append(b, '\n'))
}

func refused(v policy.Verdict, msg string) *Response {
	return &Response{Refused: true, Rule: v.Rule.ID(), Error: msg + ": " + v.Rule.Reason()}
}

func (s *controlServer) handle(pid int, req Request) *Response {
	switch req.Op {
	case "ping":
		return &Response{OK: true}
	case "sync":
		// Readers of the log (aerfs log, pending, history …) ask first,
		// so that they see the verdicts queued for the next group commit.
		if err := s.m.FlushLog(); err != nil {
			return &Response{Error: err.Error()}
		}
		return &Response{OK: true}
	case "register":
		return s.register(pid, req)
	case "taint":
		return s.taint(pid, req)
	case "promote":
		return s.promote(pid, req)
	case "snapshot":
		return s.takeSnapshot(pid, req)
	case "restore":
		return s.restore(pid, req)
	case "approve":
		return s.approve(pid, req, true)
	case "reject":
		return s.approve(pid, req, false)
	case "status":
		st := s.status()
		st.Labels = s.m.Labels.Len()
		st.Allowed, st.Denied = s.m.Stats.Allowed.Load(), s.m.Stats.Denied.Load()
		st.Committed, st.Quarantined = s.m.Stats.Committed.Load(), s.m.Stats.Quarantined.Load()
		for _, x := range s.reg.Sessions() {
			st.Sessions = append(st.Sessions, SessionStatus{ID: x.ID, Principal: x.Principal.String(),
				Taint: nonNil(x.Taint().Names()), Started: x.Started, Live: s.reg.Live(x), Quarantined: x.Quarantined()})
		}
		sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].Started.Before(st.Sessions[j].Started) })
		b, _ := json.Marshal(st)
		return &Response{OK: true, Data: b}
	}
	return &Response{Error: fmt.Sprintf("unknown request %q", req.Op)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *controlServer) register(pid int, req Request) *Response {
	p := policy.Principal(0)
	if req.Principal == "" {
		// Default: the caller's own principal.
		p = s.reg.Resolve(pid).Subject().Principal
	} else {
		var err error
		if p, err = policy.ParsePrincipal(req.Principal); err != nil {
			return &Response{Error: err.Error(), Hint: "principals are SYS, USER, TOOL_AUTH, TOOL_UNAUTH, WEB, SKILL, CHANNEL, EXTERNAL"}
		}
	}
	sess, peer, v, err := s.reg.Register(pid, p, req.Session)
	rec := &evidence.Record{Type: evidence.TypeSessionStart, Principal: p.String(),
		Meta: evidence.Meta{Session: req.Session, Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
			Op: "register", Rule: v.Rule.ID(), Reason: v.Rule.Reason()}}
	if err != nil {
		return &Response{Error: err.Error(), Hint: "session names use letters, digits, '-', '_' and '.' (at most 64)"}
	}
	if sess == nil {
		rec.Type = evidence.TypeVerdict
		rec.Meta.Verdict = "deny"
		s.m.Record(rec)
		return refused(v, fmt.Sprintf("cannot start a %s session from a %s process", p, peer.Subject().Principal))
	}
	rec.Meta.Session = sess.ID
	rec.Meta.Verdict = "allow"
	rec.Taint = nonNil(sess.Taint().Names())
	if _, err := s.m.Record(rec); err != nil {
		return &Response{Error: "cannot record the session start: " + err.Error()}
	}
	b, _ := json.Marshal(map[string]string{"session": sess.ID, "principal": p.String()})
	return &Response{OK: true, Data: b}
}

func (s *controlServer) taint(pid int, req Request) *Response {
	sess := s.reg.Session(req.Session)
	if sess == nil {
		return &Response{Error: fmt.Sprintf("no session %q", req.Session), Hint: "aerfs status lists the sessions"}
	}
	var t policy.Taint
	for _, f := range req.Flags {
		x, err := policy.ParseTaint(f)
		if err != nil {
			return &Response{Error: err.Error(), Hint: "taint flags are UNTRUSTED, INJECTION_SUSPECT, PROXY_DERIVED, SECRET_RISK, CROSS_SESSION, TOOL_OUTPUT, SKILL_OUTPUT, WEB_DERIVED"}
		}
		t |= x
	}
	if t == 0 {
		return &Response{Error: "no taint flag given"}
	}
	sess.AddTaint(t)
	peer := s.reg.Resolve(pid)
	s.m.Record(&evidence.Record{Type: evidence.TypeTaint, Principal: peer.Subject().Principal.String(), Taint: t.Names(),
		Meta: evidence.Meta{Session: sess.ID, Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
			Reason: "declared over the control socket"}})
	b, _ := json.Marshal(map[string]any{"session": sess.ID, "taint": sess.Taint().Names()})
	return &Response{OK: true, Data: b}
}

func (s *controlServer) promote(pid int, req Request) *Response {
	rel := filepath.ToSlash(filepath.Clean(req.Path))
	if rel == "." || strings.HasPrefix(rel, "../") || rel == ".." || filepath.IsAbs(rel) {
		return &Response{Error: fmt.Sprintf("%s is not inside the workspace", req.Path)}
	}
	dst, v, err := s.m.Promote(s.reg.Resolve(pid), rel)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	if !v.Allow {
		return refused(v, "promotion of "+rel+" refused")
	}
	b, _ := json.Marshal(map[string]string{"from": rel, "to": dst})
	return &Response{OK: true, Data: b}
}
