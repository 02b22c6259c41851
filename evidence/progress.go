package evidence

// Progress is told how far a long pass over the log has come: done of
// total units of a stage ("records", "blobs"). The command line draws it
// on a terminal; nil is silent. It is called every progressEvery units
// and at a stage's end, never with a lock held.
type Progress func(stage string, done, total int64)

const progressEvery = 1024

// tick reports unit done of total, every progressEvery units and at the
// last.
func (p Progress) tick(stage string, done, total int64) {
	if p != nil && (done%progressEvery == 0 || done == total) {
		p(stage, done, total)
	}
}
