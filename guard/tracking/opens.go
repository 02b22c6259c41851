package tracking

import (
	"sync"

	"github.com/aerfs/aerfs/guard/label"
)

// Opens counts, per inode, the handles open for writing through the mount:
// a file being written has a fingerprint that moves under its label, which
// must not be read as drift.
type Opens struct {
	mu      sync.Mutex
	writers map[label.Key]int
}

// WriteOpened notes a handle open for writing on k.
func (o *Opens) WriteOpened(k label.Key) {
	o.mu.Lock()
	if o.writers == nil {
		o.writers = map[label.Key]int{}
	}
	o.writers[k]++
	o.mu.Unlock()
}

// WriteClosed notes that a handle open for writing on k was released.
func (o *Opens) WriteClosed(k label.Key) {
	o.mu.Lock()
	if o.writers[k] <= 1 {
		delete(o.writers, k)
	} else {
		o.writers[k]--
	}
	o.mu.Unlock()
}

// Writing reports whether k is open for writing through the mount.
func (o *Opens) Writing(k label.Key) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writers[k] > 0
}
