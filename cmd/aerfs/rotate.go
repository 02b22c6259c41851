package main

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// rotatingFile is the daemon's log file: JSON lines appended to name,
// which is renamed to name.1 (name.1 to name.2 …, the oldest dropped) when
// a write would take it past maxSize. Only whole writes are rotated, and
// zerolog writes one line per call, so no line is split between files.
type rotatingFile struct {
	name    string
	maxSize int64
	keep    int

	mu   sync.Mutex
	f    *os.File
	size int64
}

func openRotating(name string, maxSize int64, keep int) (*rotatingFile, error) {
	r := &rotatingFile{name: name, maxSize: maxSize, keep: keep}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rotatingFile) open() error {
	f, err := os.OpenFile(r.name, os.O_CREATE|os.O_APPEND|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, fi.Size()
	return nil
}

func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxSize > 0 && r.size > 0 && r.size+int64(len(p)) > r.maxSize {
		if err := r.rotate(); err != nil {
			// Keep logging to the current file rather than lose lines.
			fmt.Fprintf(os.Stderr, "aerfs: rotating %s: %v\n", r.name, err)
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// rotate shifts name.(k-1) to name.k down to name → name.1 and reopens
// name. Called with r.mu held.
func (r *rotatingFile) rotate() error {
	if r.keep < 1 {
		// Nothing kept: start the file over.
		if err := r.f.Truncate(0); err != nil {
			return err
		}
		r.size = 0
		return nil
	}
	os.Remove(fmt.Sprintf("%s.%d", r.name, r.keep))
	for k := r.keep - 1; k >= 1; k-- {
		os.Rename(fmt.Sprintf("%s.%d", r.name, k), fmt.Sprintf("%s.%d", r.name, k+1))
	}
	if err := os.Rename(r.name, r.name+".1"); err != nil {
		return err
	}
	old := r.f
	if err := r.open(); err != nil {
		r.f = old
		return err
	}
	old.Close()
	return nil
}

func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}
