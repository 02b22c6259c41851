package gate

import (
	"strings"
	"sync"
	"time"

	"github.com/aerfs/aerfs/policy"
)

// # The names a file had a moment ago
//
// An interpreter opens its program by name, and the file that open reaches
// can be renamed between the kernel's lookup and the open the gate sees
// (a session exchanging two names in a loop wins that race now and then):
// the gate then sees the file under its new name, which the interpreter's
// command line does not name. The gate remembers the renames and hard
// links of the last seconds, each both ways (an exchange moves both), and
// Interpret matches the command line against every name the file had in
// that time. When more renames happened than it keeps, it cannot say, and
// Interpret decides the read as the program's (fail closed).

const (
	renameMemory = 5 * time.Second // how long a rename is remembered
	renameKeep   = 256             // renames kept within renameMemory
	aliasKeep    = 64              // names followed for one file
)

type renamed struct {
	from, to string
	at       time.Time
}

type renames struct {
	mu   sync.Mutex
	r    []renamed
	over time.Time // the last time a rename was not kept
}

// note remembers the renames and links among checks: a rename-from check
// followed by its rename-to, a link's source followed by its new name.
func (x *renames) note(checks []Check) {
	for i := 0; i+1 < len(checks); i++ {
		a, b := checks[i], checks[i+1]
		if a.Op == policy.OpRenameFrom && b.Op == policy.OpRenameTo || a.Op == policy.OpLink && b.Op == policy.OpLink {
			x.add(a.Rel, b.Rel)
			i++
		}
	}
}

func (x *renames) add(from, to string) {
	now := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.expire(now)
	if len(x.r) >= renameKeep {
		x.over = now
		return
	}
	x.r = append(x.r, renamed{from, to, now})
}

func (x *renames) expire(now time.Time) {
	n := 0
	for n < len(x.r) && now.Sub(x.r[n].at) > renameMemory {
		n++
	}
	x.r = x.r[n:]
}

// names returns rel and the names the file at rel had within the last
// renameMemory; false when the gate cannot tell them all.
func (x *renames) names(rel string) ([]string, bool) {
	now := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.expire(now)
	if now.Sub(x.over) <= renameMemory {
		return nil, false
	}
	out := []string{rel}
	seen := map[string]bool{rel: true}
	for i := 0; i < len(out); i++ {
		for _, r := range x.r {
			for _, p := range [2][2]string{{r.to, r.from}, {r.from, r.to}} {
				n, ok := moved(out[i], p[0], p[1])
				if !ok || seen[n] {
					continue
				}
				if len(out) >= aliasKeep {
					return nil, false
				}
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out, true
}

// moved is the name rel had before a rename of from to to (rel at to or
// below it).
func moved(rel, to, from string) (string, bool) {
	if rel == to {
		return from, true
	}
	if rest, ok := strings.CutPrefix(rel, to+"/"); ok {
		return from + "/" + rest, true
	}
	return "", false
}
