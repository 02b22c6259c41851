package main

import (
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/aerfs/aerfs/evidence"
)

// # Progress on long operations
//
// export, verify, report, gc, restore and mount can take seconds to
// minutes on a long log. On a terminal they draw a progress bar on
// standard error (github.com/schollz/progressbar): the records and blobs
// done of the total where aerfs counts them itself, a spinner with the
// elapsed time where the daemon does the work. Nothing is drawn when
// standard error is not a terminal (a pipe, a file, a unit's journal),
// with --quiet, with TERM=dumb, or for an operation done within
// progressDelay: scripts and logs see only the command's own output. The
// bar is cleared when the operation ends, so the terminal keeps only that.

// progressDelay is how long an operation runs before its bar appears.
const progressDelay = 300 * time.Millisecond

// showProgress says whether bars may be drawn.
func showProgress() bool {
	return !gopts.quiet && os.Getenv("TERM") != "dumb" && isTerminal(os.Stderr)
}

// progress is the bar of one operation.
type progress struct {
	what  string
	start time.Time
	on    bool

	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	stage string
	stop  chan struct{}
	spun  chan struct{}
}

// startProgress begins the progress of an operation named what ("export").
func startProgress(what string) *progress {
	return &progress{what: what, start: time.Now(), on: showProgress()}
}

// fn is the evidence.Progress that draws this bar; nil when bars are off.
func (p *progress) fn() evidence.Progress {
	if !p.on {
		return nil
	}
	return p.update
}

// update draws done of total units of stage.
func (p *progress) update(stage string, done, total int64) {
	if time.Since(p.start) < progressDelay {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		return // a spinner is drawing
	}
	if p.bar != nil && stage != p.stage {
		// A bar that reached its total is finished for good: each
		// stage gets its own.
		p.bar.Clear()
		p.bar = nil
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(p.what+": "+stage),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		p.stage = stage
	}
	p.bar.Set64(done)
}

// spin draws a spinner with the elapsed time while the daemon (or
// anything that does not count) works, until done is called.
func (p *progress) spin(stage string) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Clear()
		p.bar = nil
	}
	if p.stop != nil {
		return
	}
	p.stop, p.spun = make(chan struct{}), make(chan struct{})
	stop, spun := p.stop, p.spun
	go func() {
		defer close(spun)
		select {
		case <-stop:
			return
		case <-time.After(progressDelay - time.Since(p.start)):
		}
		// The library animates a spinner on its own until it is
		// finished.
		bar := progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(p.what+": "+stage),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
		)
		bar.Add(1)
		<-stop
		bar.Finish()
		bar.Clear()
	}()
}

// done clears whatever is drawn.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
		<-p.spun
		p.stop = nil
	}
	if p.bar != nil {
		p.bar.Clear()
		p.bar = nil
	}
}
