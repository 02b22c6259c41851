package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"time"
)

// # Profiles for the owner
//
// pprof answers the owner's channel only (RO-owner, like restore): a
// profile shows what the daemon holds and does, the call stacks and the
// sizes of what it keeps about every session and file, which is the
// owner's to see and no session's. The control socket already tells the
// owner's processes from everything else (peer credentials, sessions by
// cgroup); an HTTP endpoint beside the metrics would be open to every local
// user and every unconfined session that can reach the address, so aerfs
// serves none.

// maxCPUProfile bounds a CPU profile (the client waits 60 s for any answer).
const maxCPUProfile = 30 * time.Second

// Profiles the daemon answers: the runtime's named profiles, and "cpu".
var profileNames = []string{"heap", "allocs", "goroutine", "threadcreate", "block", "mutex", "cpu"}

func (s *controlServer) pprof(pid int, req Request) *Response {
	if _, refusal := s.ownerChannel(pid, "pprof"); refusal != nil {
		return refusal
	}
	var buf bytes.Buffer
	switch name := req.Profile; name {
	case "cpu":
		d := maxCPUProfile
		if req.Seconds != 0 {
			d = time.Duration(req.Seconds) * time.Second
			if d <= 0 || d > maxCPUProfile {
				return &Response{Error: fmt.Sprintf("bad profile duration %ds", req.Seconds), Hint: fmt.Sprintf("give --seconds 1 to %d", int(maxCPUProfile.Seconds()))}
			}
		}
		if err := pprof.StartCPUProfile(&buf); err != nil {
			return &Response{Error: "cannot profile: " + err.Error()}
		}
		time.Sleep(d)
		pprof.StopCPUProfile()
	default:
		p := pprof.Lookup(name)
		if p == nil || name == "" {
			return &Response{Error: fmt.Sprintf("unknown profile %q", name), Hint: fmt.Sprintf("profiles: %v", profileNames)}
		}
		if name == "heap" {
			runtime.GC() // what is live now, not what the last cycle saw
		}
		if err := p.WriteTo(&buf, 0); err != nil {
			return &Response{Error: "cannot write the profile: " + err.Error()}
		}
	}
	b, _ := json.Marshal(buf.Bytes())
	return &Response{OK: true, Data: b}
}
