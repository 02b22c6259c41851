package evidence

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"
)

// Filter selects records for `aerfs log` and `aerfs export`. Zero fields
// match everything.
type Filter struct {
	Since   time.Time // records at or after this time
	Session string    // meta.session equal
	Path    string    // meta.path, payload.from or payload.to equal to Path or under Path/
	Type    string    // type equal
}

// IsZero reports whether f selects every record.
func (f Filter) IsZero() bool {
	return f.Since.IsZero() && f.Session == "" && f.Path == "" && f.Type == ""
}

// Match reports whether r is selected.
func (f Filter) Match(r *Record) bool {
	if f.Type != "" && r.Type != f.Type {
		return false
	}
	if f.Session != "" && r.Meta.Session != f.Session {
		return false
	}
	if !f.Since.IsZero() {
		t, err := ParseTime(r.Meta.Time)
		if err != nil || t.Before(f.Since) {
			return false
		}
	}
	if f.Path != "" {
		p := strings.TrimSuffix(f.Path, "/")
		under := func(s string) bool { return s == p || strings.HasPrefix(s, p+"/") }
		ok := under(r.Meta.FilePath())
		if r.Payload != nil {
			ok = ok || under(r.Payload.FromPath()) || under(r.Payload.ToPath())
		}
		if !ok {
			return false
		}
	}
	return true
}

// ReadAll calls fn for every record the current checkpoint covers, in log
// order. It takes no lock: the daemon may be appending meanwhile, and
// records past the checkpoint are not yet committed, so they are not shown.
// fn returning an error stops the walk and ReadAll returns that error.
func ReadAll(stateDir string, fn func(idx int64, id string, r *Record) error) error {
	_, err := readRange(stateDir, 0, fn)
	return err
}

// readRange walks records [from, checkpoint size) and returns the size.
func readRange(stateDir string, from int64, fn func(idx int64, id string, r *Record) error) (int64, error) {
	rd, err := openReader(stateDir)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	n := rd.cp.Size
	if from >= n {
		return n, nil
	}
	start, _, _, err := readEntry(rd.index, from)
	if err != nil {
		return 0, fmt.Errorf("evidence: %w", err)
	}
	_, end, _, err := readEntry(rd.index, n-1)
	if err != nil {
		return 0, fmt.Errorf("evidence: %w", err)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(rd.log, start, end-start), 1<<16)
	for i := from; i < n; i++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A record longer than the buffer: collect it.
			buf := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil {
			return 0, fmt.Errorf("evidence: record %d: %w", i, err)
		}
		body := line[:len(line)-1]
		r, err := ParseRecord(body)
		if err != nil {
			return 0, fmt.Errorf("evidence: record %d: %w", i, err)
		}
		sum := sha256.Sum256(body)
		if err := fn(i, hex.EncodeToString(sum[:]), r); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Follow calls fn for records from fromIdx on, then keeps polling for new
// checkpoints until ctx is done (`aerfs log -f`). It returns ctx.Err() on
// cancellation.
func Follow(ctx context.Context, stateDir string, fromIdx int64, fn func(idx int64, id string, r *Record) error) error {
	const poll = 200 * time.Millisecond
	next := fromIdx
	for {
		n, err := readRange(stateDir, next, fn)
		if err != nil {
			return err
		}
		if n > next {
			next = n
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
