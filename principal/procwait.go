package principal

import (
	"sync"
	"time"
)

// # Reading /proc of a process on its way out
//
// The /proc entries of a process whose threads are exiting can block
// their reader until the exit is done (do_task_stat, the namespace links),
// and an exit closes the process's files: each close of a file of this
// mount is a FLUSH that waits for this daemon's answer. A daemon that
// reads such a process's /proc while answering its FLUSH waits for an exit
// that waits for it. Every resolution therefore reads /proc under a bound:
// past ProcWait the process is taken as one whose entries do not answer
// (unidentified; a writer on its way out), and while that read is still
// blocked, later resolutions of the same process do not wait again.

// ProcWait bounds a resolution's reads of /proc.
const ProcWait = time.Second

var stalled sync.Map // tid → chan struct{} closed when its blocked read returns

// WithinProcWait runs f, which reads /proc entries of process tid, and
// reports whether it returned within ProcWait. When it did not, f goes on
// in the background, and until it returns further calls for tid report
// false at once without running their f.
func WithinProcWait(tid int, f func()) bool {
	if _, ok := stalled.Load(tid); ok {
		return false
	}
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	t := time.NewTimer(ProcWait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	}
	if _, loaded := stalled.LoadOrStore(tid, done); !loaded {
		go func() {
			<-done
			stalled.Delete(tid)
		}()
	}
	return false
}
