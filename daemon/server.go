package daemon

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/logindex"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

type controlServer struct {
	m        *guarded
	ws       string // the workspace: where the mount is
	stateDir string
	reg      *principal.Registry
	log      zerolog.Logger
	status   func() Status
	prune    Pruner          // the log's Prune
	index    *logindex.Index // the log's index: sessions retired from the registry (state.go)
	rec      ledger.Recorder // for records queued without waiting (net records)
	ln       *net.UnixListener
	shared   *serverShared

	// caller is set on the copy of the server that serves one request:
	// the requesting process, resolved and checked to be the one that
	// connected.
	caller *principal.Resolved
	// files came with the request (SCM_RIGHTS); a handler that keeps one
	// sets its entry to nil, the rest are closed after the request.
	files []*os.File
}

// serverShared is what every request's copy of the server shares.
type serverShared struct {
	wg     sync.WaitGroup
	limits *connLimits
	admit  chan struct{} // connections being admitted
	conf   *confinements // what aerfs run applied to each session
	gate   *socketGate   // the connect() calls of confined sessions (sockets.go)
	nets   *sessionNets  // each session's network and proxy (netproxy.go)
	// inherited: what sessions took from the descriptors they started
	// with (inherit.go).
	inherited inheritance
	// readers: the owner's readers of the state running (ownerread.go);
	// done is closed when the daemon stops serving, which ends them.
	readers chan struct{}
	done    chan struct{}
}

func (s *controlServer) listen(path string) error {
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	// Anyone may ask; every request is authorised by the process that
	// connected, and what one uid or session may hold is bounded.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return err
	}
	s.ln = ln
	s.shared = &serverShared{limits: newConnLimits(), admit: make(chan struct{}, admitting), conf: newConfinements(),
		readers: make(chan struct{}, ownerReaders), done: make(chan struct{}), nets: newSessionNets(s.m, s.rec, s.log)}
	l := s.shared.limits
	s.log.Debug().Int("total", l.total).Int("per_uid", l.perUID).Int("per_session", l.perKey).Msg("control socket limits")
	// A retired session (ended, no process left) leaves status: what the
	// server keeps of it goes too.
	s.reg.OnRetire(func(x *principal.Session) {
		s.shared.conf.forget(x.ID)
		s.shared.nets.forget(x.ID)
		s.shared.inherited.forget(x.ID)
	})
	if g, err := newSocketGate(s, path); err != nil {
		// Confined sessions cannot start then: aerfs run refuses to run
		// one whose sockets nobody decides.
		s.log.Error().Err(err).Msg("cannot decide the sockets of confined sessions")
	} else {
		s.shared.gate = g
	}
	return nil
}

func (s *controlServer) close() {
	if s.shared.gate != nil {
		s.shared.gate.close()
	}
	s.ln.Close()
	close(s.shared.done)
	s.shared.wg.Wait()
	s.shared.nets.close()
}

// serve accepts until the listener is closed. Running out of descriptors
// (EMFILE, ENFILE) or memory does not stop it: it backs off, says so once,
// and keeps serving.
func (s *controlServer) serve() {
	backoff, failing := 5*time.Millisecond, false
	for {
		s.shared.admit <- struct{}{}
		c, err := s.ln.AcceptUnix()
		if err != nil {
			<-s.shared.admit
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if !failing {
				s.log.Warn().Err(err).Msg("control socket: accept failed; backing off and serving on")
				failing = true
			}
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		if failing {
			s.log.Info().Msg("control socket: accepting again")
			failing = false
		}
		backoff = 5 * time.Millisecond
		s.shared.wg.Add(1)
		go func() {
			defer s.shared.wg.Done()
			defer c.Close()
			p, release := s.admitConn(c)
			<-s.shared.admit
			if p == nil {
				return
			}
			defer p.close()
			defer release()
			s.handleConn(c, p)
		}()
	}
}

// adoptConn serves c, a connection the daemon made on behalf of the process p
// (sockets.go), as a control connection of p.
func (s *controlServer) adoptConn(c *net.UnixConn, p *peer) {
	s.shared.wg.Add(1)
	go func() {
		defer s.shared.wg.Done()
		defer c.Close()
		release := s.admitPeer(c, p)
		if release == nil {
			return
		}
		defer p.close()
		defer release()
		s.handleConn(c, p)
	}()
}

// admitConn binds c to its peer and counts it against the limits of the
// peer's session tree (or uid outside sessions), uid, and all. A
// connection that cannot be bound or is over a limit is answered with one
// line and closed at once.
func (s *controlServer) admitConn(c *net.UnixConn) (*peer, func()) {
	p, err := bindPeer(c, func(msg string) { s.log.Warn().Msg(msg) })
	if err != nil {
		answerAndClose(c, &Response{Error: "cannot identify the connecting process: " + err.Error(),
			Hint: "requests must come over the local socket from the process that connected"})
		return nil, nil
	}
	release := s.admitPeer(c, p)
	if release == nil {
		return nil, nil
	}
	return p, release
}

// admitPeer counts the connection c of p against the limits, or answers
// and closes it (and p) when over one.
func (s *controlServer) admitPeer(c *net.UnixConn, p *peer) func() {
	var key any = p.uid
	name := fmt.Sprintf("uid %d outside sessions", p.uid)
	res := s.reg.Resolve(p.pid)
	if res.Identified && res.Proc.ID.Start == p.start {
		subj := res.Subject()
		p.principal, p.session, p.exe = subj.Principal.String(), subj.Session, res.Proc.Exe
		if res.Session != nil {
			top := res.Session.Outermost()
			key, name = top, "session "+top.ID+" and the sessions started from within it"
		}
	}
	release, over := s.shared.limits.acquire(p.uid, key, name)
	if over != "" {
		if s.shared.limits.shouldWarn() {
			s.log.Warn().Int("pid", p.pid).Uint32("uid", p.uid).Msg("control socket: " + over + "; refusing connections over the limit")
		}
		p.close()
		answerAndClose(c, &Response{Error: over, Hint: "close idle connections to the control socket"})
		return nil
	}
	return release
}

func answerAndClose(c *net.UnixConn, resp *Response) {
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	b, _ := json.Marshal(resp)
	c.Write(append(b, '\n'))
	c.Close()
}

// maxOwnerLine bounds a request line from the owner outside sessions (or
// root): an edit of a file of up to 8 MiB, in base64.
const maxOwnerLine = 12 << 20

// lineReader gives the request line lineTimeout once its first byte came,
// and keeps the descriptors that came with it (SCM_RIGHTS: the listening
// sockets of a session's proxy, netproxy.go).
type lineReader struct {
	c       *net.UnixConn
	started bool
	files   []*os.File
	bad     bool // descriptors were cut or came with a later read
}

func (r *lineReader) Read(b []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(maxRequestFiles*4))
	n, oobn, flags, _, err := r.c.ReadMsgUnix(b, oob)
	if oobn > 0 {
		r.takeFiles(oob[:oobn], flags&unix.MSG_CTRUNC != 0)
	}
	if n > 0 && !r.started {
		r.started = true
		r.c.SetReadDeadline(time.Now().Add(lineTimeout))
	}
	return n, err
}

// maxRequestFiles bounds the descriptors one request may carry.
const maxRequestFiles = 8

func (r *lineReader) takeFiles(oob []byte, cut bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || cut || r.started {
		r.bad = true
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if len(r.files) >= maxRequestFiles {
				unix.Close(fd)
				r.bad = true
				continue
			}
			r.files = append(r.files, os.NewFile(uintptr(fd), "request descriptor"))
		}
	}
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

func (s *controlServer) handleConn(c *net.UnixConn, p *peer) {
	c.SetReadDeadline(time.Now().Add(idleTimeout))
	lr := &lineReader{c: c}
	defer func() { closeFiles(lr.files) }()
	sc := bufio.NewScanner(lr)
	// A request line is small (64 KiB), but for the owner's channel: an
	// edit carries the whole new content of an identity or memory file.
	maxLine := 64 << 10
	if p.session == "" && (p.uid == 0 || p.uid == s.reg.OwnerUID) {
		maxLine = maxOwnerLine
	}
	sc.Buffer(make([]byte, 4096), maxLine)
	if !sc.Scan() {
		return
	}
	c.SetReadDeadline(time.Time{})
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
	if err == nil && req.Op == "read" {
		s.serveRead(c, p, req) // ownerread.go: answered frame by frame
		return
	}
	if err == nil && req.Op == "supervise" && len(lr.files) == 0 {
		s.serveSupervise(c, p, req) // sockets.go: a descriptor follows the answer
		return
	}
	switch {
	case err != nil:
		resp = &Response{Error: "malformed request: " + err.Error()}
	case len(lr.files) > 0 && (lr.bad || req.Op != "confined"):
		resp = &Response{Error: "descriptors are taken only with a session's confinement report, at most " + strconv.Itoa(maxRequestFiles) + ", with the request's first bytes"}
	default:
		rs := *s
		rs.files, lr.files = lr.files, nil
		resp = rs.serveRequest(p, req)
		closeFiles(rs.files)
	}
	b, _ := json.Marshal(resp)
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	c.Write(append(b, '\n'))
}

// serveRequest resolves the caller by pid, checks that it is the process
// that connected, and serves req with that resolution.
func (s *controlServer) serveRequest(p *peer, req Request) *Response {
	switch req.Op {
	case "ping", "sync", "network-mode":
		// Open to any caller: they change nothing and tell nothing of
		// sessions.
		return s.handle(p.pid, req)
	}
	res := s.reg.Resolve(p.pid)
	if err := p.verify(res); err != nil {
		return s.refuseStale(p, req, res)
	}
	rs := *s
	rs.caller = res
	resp := rs.handle(p.pid, req)
	if req.Op == "register" {
		// register resolves the pid itself: the connector alive
		// afterwards proves that it resolved the connector.
		if err := p.check(); err != nil {
			s.log.Warn().Int("pid", p.pid).Str("session", req.Session).Msg("control socket: the registering process exited during its registration")
		}
	}
	return resp
}

// refuseStale refuses and records a request whose connection outlived the
// process that made it.
func (s *controlServer) refuseStale(p *peer, req Request, now *principal.Resolved) *Response {
	v := policy.Verdict{Rule: policy.RuleUnidentified}
	why := fmt.Sprintf("the process that connected (pid %d) has exited", p.pid)
	if now != nil && now.Identified && now.Proc.ID.Tgid == p.pid && now.Proc.ID.Start != p.start {
		why += "; its pid now belongs to another process"
	}
	who := p.principal
	if who == "" {
		who = policy.External.String() // never identified
	}
	s.m.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: who,
		Meta: evidence.Meta{Op: req.Op, Verdict: "deny", Pid: p.pid, UID: p.uid, Exe: p.exe, Session: p.session, Path: req.Path,
			Rule: v.Rule.ID(), Reason: why + ": a connection speaks only for the process that made it"}})
	return &Response{Refused: true, Rule: v.Rule.ID(), Error: req.Op + " refused: " + why,
		Hint: "a control connection speaks only for the process that connected; connect from the process that asks"}
}

// resolveCaller is the requesting process: the resolution checked for this
// request, or (outside a request) the pid resolved now.
func (s *controlServer) resolveCaller(pid int) *principal.Resolved {
	if s.caller != nil && s.caller.Proc.ID.Tgid == pid {
		return s.caller
	}
	return s.reg.Resolve(pid)
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
	case "network-mode":
		// aerfs run asks before it makes the session's namespaces.
		b, _ := json.Marshal(map[string]string{"network": s.m.Policy().SandboxNetwork().String()})
		return &Response{OK: true, Data: b}
	case "register":
		return s.registerNoting(pid, req)
	case "confined":
		return s.confined(pid, req)
	case "session-list", "session-release", "session-end", "why", "edit-get", "edit", "adopt":
		return s.ownerRequest(pid, req) // session_requests.go
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
	case "authority", "authorize", "authorize-check", "attest":
		return s.authorityOp(pid, req)
	case "gc":
		return s.gc(pid, req)
	case "pprof":
		return s.pprof(pid, req) // pprof.go
	case "status":
		st := s.status()
		gs := s.m.Status()
		st.Labels = gs.Labels
		st.Allowed, st.Denied = gs.Allowed, gs.Denied
		st.Committed, st.Quarantined = gs.Committed, gs.Quarantined
		st.Drift, st.DriftCount = s.m.driftFound()
		st.PolicyHeld = s.m.policyHeld()
		addRootStatus(s.m, &st)
		if pol := s.m.Policy(); pol != nil {
			home := OwnerHome(st.Workspace)
			st.SessionWritable = append(pol.SandboxWritable(home), pol.SandboxPrivate(home)...)
		}
		// The sessions the registry holds: those live, and those ended
		// and not yet retired (principal/archive.go); aerfs session list
		// --all shows the retired ones from the log. A session sees only
		// itself and those started from within it: another session's
		// hosts and taint would reach it without tainting it.
		caller := s.resolveCaller(pid)
		for _, x := range s.reg.Sessions() {
			if !visibleTo(caller, x) {
				continue
			}
			st.Sessions = append(st.Sessions, SessionStatus{ID: x.ID, Principal: x.Principal.String(),
				Taint: nonNil(x.Taint().Names()), Started: x.Started, Live: s.reg.Live(x), Quarantined: x.Quarantined(),
				Confinement: s.shared.conf.describe(x.ID)})
			st.Sessions[len(st.Sessions)-1].Network, st.Sessions[len(st.Sessions)-1].Hosts = s.shared.nets.describe(x.ID)
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
	if msg := checkAgent(req.Agent); msg != "" {
		return &Response{Error: msg, Hint: "agents are named like claude-code, codex, gemini, openclaw"}
	}
	if err := checkAnnouncement(req.Sandbox); err != nil {
		return &Response{Error: err.Error(), Hint: "aerfs run announces the confinement it applies"}
	}
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
	plan, err := parseNetPlan(req, "")
	if err != nil {
		return &Response{Error: err.Error(), Hint: "aerfs run sends the network of the session it starts; check that this aerfs is the daemon's version"}
	}
	reg, peer, v, err := s.reg.RegisterWith(pid, p, req.Session, req.Resume)
	if reg != nil && reg.Parent != "" {
		plan.parent, plan.model = reg.Parent, nil
	}
	rec := &evidence.Record{Type: evidence.TypeSessionStart, Principal: p.String(),
		Meta: evidence.Meta{Session: req.Session, Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
			Op: "register", Rule: v.Rule.ID(), Reason: v.Rule.Reason()}, Payload: &evidence.Payload{Detail: "sandbox: " + req.Sandbox + netDetail(plan, s.m.Policy()) + agentDetail(req.Agent)}}
	if hl := new(*principal.HostLockError); errors.As(err, hl) {
		// Fail closed: the process is not moved without the lock.
		rec.Type, rec.Meta.Verdict, rec.Meta.Reason = evidence.TypeVerdict, "deny", (*hl).Error()
		s.m.Record(rec)
		return &Response{Refused: true, Rule: v.Rule.ID(), Error: "cannot start the session: " + (*hl).Error(),
			Hint: "try again: an aerfs daemon holds the lock while it moves a process, or the root process named holds it"}
	}
	if err != nil {
		return &Response{Error: err.Error(), Hint: "session names use letters, digits, '-', '_' and '.' (at most 64)"}
	}
	if reg == nil {
		rec.Type = evidence.TypeVerdict
		rec.Meta.Verdict = "deny"
		s.m.Record(rec)
		if v.Rule == policy.RuleSession {
			return &Response{Refused: true, Rule: v.Rule.ID(),
				Error: fmt.Sprintf("session %q was registered by another process: %s", req.Session, v.Rule.Reason()),
				Hint:  "start a new session without --session, or, as the owner outside sessions, rejoin it with aerfs run --resume --session " + req.Session}
		}
		return refused(v, fmt.Sprintf("cannot start a %s session from a process whose principal is %s", p, peer.Subject().Principal))
	}
	sess := reg.Session
	// Before the answer: aerfs run execs the session's command only after
	// it, so nothing the session writes predates the flag.
	sess.SetAgent(req.Agent)
	rec.Meta.Session = sess.ID
	rec.Meta.Verdict = "allow"
	rec.Taint = nonNil(sess.Taint().Names())
	// From: the session it was started from; To: its cgroup. A later
	// mount rebuilds the registration from them.
	rec.Payload.From, rec.Payload.To = reg.Parent, reg.Cgroup
	// What the process holds open on the mounts, the session's command
	// inherits: it is the session's from now on (inherit.go).
	releases, took, err := s.inherit(peer.Proc.ID.Tgid, peer.Proc.UID)
	if err != nil {
		rec.Type, rec.Meta.Verdict, rec.Meta.Reason = evidence.TypeVerdict, "deny", "cannot start the session: "+err.Error()
		s.m.Record(rec)
		return &Response{Error: "cannot start session " + sess.ID + ": " + err.Error(),
			Hint: "close that descriptor or start the session without it; aerfs status says whether the state directory is failing"}
	}
	if len(took) > 0 {
		rec.Payload.Detail += "; inherited: " + strings.Join(took, ", ")
	}
	if _, err := s.m.Record(rec); err != nil {
		for _, r := range releases {
			r()
		}
		return &Response{Error: "cannot record the session start: " + err.Error()}
	}
	s.shared.inherited.add(sess.ID, releases)
	s.shared.conf.registered(sess.ID, peer.Proc.ID, req.Sandbox)
	s.makeSessionDir(sess.ID)
	s.shared.nets.planned(sess.ID, peer.Proc.ID, plan)
	data := map[string]any{"session": sess.ID, "principal": p.String()}
	if req.Sandbox != "off" {
		pol := s.m.Policy()
		var rs Status
		addRootStatus(s.m, &rs) // the further roots: the mount decides there
		data["sandbox"] = sessionSandbox(s.status().Workspace, pol.SandboxWritable, pol.SandboxPrivate, pol.SandboxPrivateTmp(), rs.Roots)
	}
	b, _ := json.Marshal(data)
	return &Response{OK: true, Data: b}
}

// promoteRefusal says why rule R5 refused the promotion of rel, of the
// four things it requires: the owner asks, from outside every session,
// untainted; the item is in a session's namespace; the item is not
// tainted — naming the taint, the session that wrote the item and what
// tainted that session.
func (s *controlServer) promoteRefusal(peer *principal.Resolved, rel string) (msg, hint string) {
	pol := s.m.Policy()
	subj := peer.Subject()
	sessions, _ := pol.Namespaces()
	base := "promotion of " + rel + " refused: "
	switch {
	case !subj.Identified || !subj.Principal.Trusted() || peer.Session != nil && !peer.Session.Implicit:
		who := subj.Principal.String()
		if peer.Session != nil {
			who = "session " + peer.Session.ID + " (" + who + ")"
		}
		return base + "only the owner promotes, from outside every session; the caller is " + who,
			"run aerfs promote at your own terminal, not from within aerfs run"
	case subj.Taint&pol.Blocking() != 0:
		return base + "the caller carries taint " + (subj.Taint & pol.Blocking()).String(), "run aerfs promote from a shell that read nothing tainted"
	case sessions == "" || !strings.HasPrefix(rel, sessions+"/") || strings.Count(strings.TrimPrefix(rel, sessions+"/"), "/") == 0:
		return base + "only an item inside " + sessions + "/<session>/ can be promoted", "give a path like " + sessions + "/<session>/notes.md"
	}
	e := s.m.Explain(guard.Question{Path: rel})
	label, _, _ := strings.Cut(e.Label, ":")
	msg = base + rel + " is tainted (" + label + ")"
	// Only the session the directory is named after (and the owner)
	// writes in it.
	id, _, _ := strings.Cut(strings.TrimPrefix(rel, sessions+"/"), "/")
	msg += "; written by session " + id
	if x := s.reg.Session(id); x != nil {
		msg += " (" + x.Principal.String() + ", taint " + x.Taint().String() + ")"
	}
	if c := s.taintCauses(id); c != "" {
		msg += ", tainted by: " + c
	}
	return msg, "aerfs why " + rel + " shows where the taint came from; after reviewing the content, aerfs adopt " + rel + " accepts it as yours, and it can then be promoted"
}

// makeSessionDir makes the session's own namespace, sessions/<id>/, owned
// like the workspace: a session may not make it itself (the sessions root
// is the owner's), and aerfs promote takes items from it.
func (s *controlServer) makeSessionDir(id string) {
	sessions, _ := s.m.Policy().Namespaces()
	if sessions == "" || !principal.ValidSessionID(id) || strings.ContainsAny(id, "/") || id == "." || id == ".." {
		return
	}
	rel := sessions + "/" + id
	if _, err := s.m.dir.Lstat(rel); err == nil {
		return
	}
	if err := s.m.dir.MkdirAll(rel); err != nil {
		s.log.Warn().Err(err).Str("path", rel).Msg("cannot make the session's directory")
		return
	}
	if root, err := s.m.dir.Lstat("."); err == nil {
		for _, p := range []string{sessions, rel} {
			if fd, err := s.m.dir.OpenDir(p); err == nil {
				unix.Fchown(fd, int(root.Uid), int(root.Gid))
				unix.Close(fd)
			}
		}
	}
}

// taint declares taint for a session. A session may declare it for
// itself and the sessions started from within it; the owner's channel (a
// trusted process outside every session) for any session.
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
	peer := s.resolveCaller(pid)
	subj := peer.Subject()
	owner := subj.Identified && peer.Session == nil && subj.Principal.Trusted()
	if !owner && !(subj.Identified && sess.Within(peer.Session)) {
		v := policy.Verdict{Rule: policy.RuleControl}
		if !subj.Identified {
			v.Rule = policy.RuleUnidentified
		}
		s.m.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
			Meta: evidence.Meta{Op: "taint", Verdict: "deny", Session: subj.Session, Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
				Rule: v.Rule.ID(), Reason: fmt.Sprintf("declaring %s for session %s: %s", t, sess.ID, v.Rule.Reason())}})
		msg := fmt.Sprintf("taint of session %s refused", sess.ID)
		if subj.Session != "" {
			msg += " from session " + subj.Session
		}
		r := refused(v, msg)
		r.Hint = "a session may taint itself and the sessions started from within it; the owner (outside sessions) any session"
		return r
	}
	sess.AddTaint(t)
	if id, _ := s.m.Record(&evidence.Record{Type: evidence.TypeTaint, Principal: subj.Principal.String(), Taint: t.Names(),
		Meta: evidence.Meta{Session: sess.ID, Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
			Reason: "declared over the control socket"}}); id != "" {
		s.m.TaintedBy(sess.ID, id)
	}
	b, _ := json.Marshal(map[string]any{"session": sess.ID, "taint": sess.Taint().Names()})
	return &Response{OK: true, Data: b}
}

func (s *controlServer) promote(pid int, req Request) *Response {
	rel := filepath.ToSlash(filepath.Clean(req.Path))
	if rel == "." || strings.HasPrefix(rel, "../") || rel == ".." || filepath.IsAbs(rel) {
		return &Response{Error: fmt.Sprintf("%s is not inside the workspace", req.Path)}
	}
	peer := s.resolveCaller(pid)
	dst, v, err := s.m.Promote(peer, rel)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	if !v.Allow {
		r := refused(v, "promotion of "+rel+" refused")
		switch {
		case v.Rule == policy.RulePromotion:
			r.Error, r.Hint = s.promoteRefusal(peer, rel)
		case dst != "":
			why, hint, _ := strings.Cut(dst, "\n")
			r.Error, r.Hint = "promotion of "+rel+" refused: "+why, hint
		}
		return r
	}
	b, _ := json.Marshal(map[string]string{"from": rel, "to": dst})
	return &Response{OK: true, Data: b}
}
