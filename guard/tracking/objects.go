package tracking

import (
	"sync"

	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/principal"
)

// maxLookers is how many recent lookers of one object are remembered.
const maxLookers = 64

// Objects remembers who looked up each FIFO, socket and device node: the
// data that passes through one never reaches aerfs, so an untrusted
// looker (a potential writer) taints the lookers before it.
type Objects struct {
	mu sync.Mutex
	m  map[label.Key][]*principal.Resolved
}

// Looked notes that res looked the object k up and returns who looked it
// up before (the last maxLookers).
func (o *Objects) Looked(k label.Key, res *principal.Resolved) []*principal.Resolved {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[label.Key][]*principal.Resolved{}
	}
	prev := o.m[k]
	ls := append(prev, res)
	if len(ls) > maxLookers {
		ls = ls[len(ls)-maxLookers:]
	}
	o.m[k] = ls
	return prev
}

// Forget forgets the lookers of k (its last name is gone).
func (o *Objects) Forget(k label.Key) {
	o.mu.Lock()
	delete(o.m, k)
	o.mu.Unlock()
}
