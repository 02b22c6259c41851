package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/aerfs/aerfs/internal/procstat"
	"github.com/aerfs/aerfs/principal"
	"github.com/aerfs/aerfs/sandbox"
)

// confinements are what `aerfs run` applied to each session registered
// during this mount, for `aerfs status`: reported once by the session's
// root process before it executes the session's command, and shown with
// what the kernel shows of that process now.
type confinements struct {
	mu sync.Mutex
	m  map[string]*sessionConfs
}

// sessionConfs are the registrations of one session id: several processes
// may join it, each with its own aerfs run.
type sessionConfs struct {
	byRoot map[principal.ProcID]*sessionConf
	last   *sessionConf
}

type sessionConf struct {
	root       principal.ProcID
	planned    string // the register request's sandbox field ("off": none)
	reported   bool
	summary    string
	supervised bool // its connect() listener was handed over (sockets.go)
}

func newConfinements() *confinements { return &confinements{m: map[string]*sessionConfs{}} }

// registered notes a registration of session id by the process root,
// which announced planned. aerfs status shows the latest registration's.
func (c *confinements) registered(id string, root principal.ProcID, planned string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.m[id]
	if x == nil {
		x = &sessionConfs{byRoot: map[principal.ProcID]*sessionConf{}}
		c.m[id] = x
	}
	for r := range x.byRoot {
		if _, err := os.Stat("/proc/" + strconv.Itoa(r.Tgid)); err != nil {
			delete(x.byRoot, r)
		}
	}
	x.last = &sessionConf{root: root, planned: planned}
	x.byRoot[root] = x.last
}

// forget drops the registrations of the retired session id.
func (c *confinements) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// claimSupervision reports whether root, which registered session id
// confined, may hand over its connect() listener now: once.
func (c *confinements) claimSupervision(id string, root principal.ProcID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.m[id]
	if x == nil {
		return false
	}
	sc := x.byRoot[root]
	if sc == nil || sc.planned == "off" || sc.supervised || sc.reported {
		return false
	}
	sc.supervised = true
	return true
}

// describe is the confinement of session id as `aerfs status` shows it.
func (c *confinements) describe(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sc *sessionConf
	if x := c.m[id]; x != nil {
		sc = x.last
	}
	switch {
	case sc == nil:
		return "unknown (registered before this mount)"
	case sc.planned == "off":
		return "unconfined (--sandbox=off)"
	case !sc.reported:
		return "not reported (registered without aerfs run's confinement report)"
	}
	// The report comes from the thread that confined itself, before it
	// executes the command; once it has, the whole process shows it.
	kv := "root process exited"
	if _, err := os.Stat("/proc/" + strconv.Itoa(sc.root.Tgid)); err == nil {
		kv = kernelView(sc.root.Tgid)
	}
	return sc.summary + "; kernel: " + kv
}

// confined takes the report of what aerfs run applied to its session. Only
// the process that registered may send it, once, and only for a session
// registered as confined: the command it executes afterwards (the same
// process) cannot rewrite it, and an unconfined session cannot claim it.
func (s *controlServer) confined(pid int, req Request) *Response {
	res := s.resolveCaller(pid)
	if !res.Identified || res.Session == nil {
		return &Response{Error: "a confinement report comes from the root process of the session it describes",
			Hint: "aerfs run sends it before it executes the session's command"}
	}
	var rep sandbox.Report
	if err := json.Unmarshal([]byte(req.Sandbox), &rep); err != nil {
		return &Response{Error: "malformed confinement report: " + err.Error()}
	}
	c := s.shared.conf
	c.mu.Lock()
	defer c.mu.Unlock()
	var sc *sessionConf
	if x := c.m[res.Session.ID]; x != nil {
		sc = x.byRoot[res.Proc.ID]
	}
	if sc == nil || sc.planned == "off" || sc.reported {
		return &Response{Error: fmt.Sprintf("session %s: the confinement is reported once, by the process that registered it confined", res.Session.ID)}
	}
	// Shown to the owner: only what the daemon can check (reportcheck.go).
	if err := checkReport(&rep, pid); err != nil {
		s.log.Warn().Str("session", res.Session.ID).Int("pid", pid).Str("why", err.Error()).Msg("confinement report refused")
		return &Response{Error: "confinement report refused: " + err.Error()}
	}
	if len(s.files) > 0 || len(req.Listeners) > 0 {
		// The proxy's listening sockets, from inside the session's
		// network namespace (netproxy.go).
		if err := s.shared.nets.attach(res, req.Listeners, s.files); err != nil {
			s.log.Warn().Err(err).Str("session", res.Session.ID).Msg("session network: listeners refused")
			return &Response{Error: "session " + res.Session.ID + ": the proxy's listeners were refused: " + err.Error(),
				Hint: "run it with --sandbox=off, or set sandbox.network: open in the policy, if this kernel cannot give sessions a network namespace"}
		}
	}
	sc.reported = true
	sc.summary = rep.Summary()
	s.log.Info().Str("session", res.Session.ID).Int("pid", pid).Str("confinement", sc.summary).Msg("session confined")
	return &Response{OK: true}
}

// kernelView is what /proc shows of pid's confinement: no_new_privs, the
// seccomp mode, whether its user and mount namespaces are its own (not the
// daemon's), and its effective, permitted and bounding capability sets
// (CapEff=0 CapPrm=0 CapBnd=0 in a confined session).
func kernelView(pid int) string {
	base := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(base + "/status")
	if err != nil {
		return "unreadable: " + err.Error()
	}
	f := procstat.Fields(b)
	var out []string
	if f["NoNewPrivs"] == "1" {
		out = append(out, "no_new_privs")
	} else {
		out = append(out, "no no_new_privs")
	}
	switch f["Seccomp"] {
	case "2":
		out = append(out, "seccomp filter")
	case "1":
		out = append(out, "seccomp strict")
	default:
		out = append(out, "no seccomp")
	}
	caps := map[string]string{}
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
		v, ok := f[k]
		if !ok {
			continue
		}
		if t := strings.TrimLeft(v, "0"); t != "" {
			v = t
		} else {
			v = "0"
		}
		caps[k] = k + "=" + v
	}
	var own []string
	for _, ns := range []string{"user", "mnt", "net"} {
		mine, err1 := os.Readlink("/proc/self/ns/" + ns)
		theirs, err2 := os.Readlink(base + "/ns/" + ns)
		if err1 == nil && err2 == nil && mine != theirs {
			own = append(own, ns)
		}
	}
	if len(own) > 0 {
		out = append(out, "own "+strings.Join(own, "+")+" namespaces")
	} else {
		out = append(out, "the daemon's namespaces")
	}
	if len(caps) == 3 {
		out = append(out, caps["CapEff"]+" "+caps["CapPrm"]+" "+caps["CapBnd"])
	}
	return strings.Join(out, ", ")
}

// sessionSandbox is what a confined session of workspace ws may write
// besides the workspace (the policy's sandbox.writable, "~" being the
// workspace owner's home, and the directories of the further roots, which
// the mount guards), the directories it gets empty and its own
// (sandbox.private) and whether it gets a private /tmp: aerfs run
// asks for it at registration, since the owner may not read the policy in
// a root daemon's state directory.
func sessionSandbox(ws string, writable, private func(home string) []string, privateTmp bool, roots map[string]string) map[string]any {
	home := ""
	var st syscall.Stat_t
	if syscall.Stat(ws, &st) == nil {
		if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
			home = u.HomeDir
		}
	}
	w := append([]string{}, writable(home)...)
	for _, d := range roots {
		w = append(w, d)
	}
	sort.Strings(w[len(w)-len(roots):])
	return map[string]any{"writable": w, "private": private(home), "private_tmp": privateTmp, "home": home}
}
