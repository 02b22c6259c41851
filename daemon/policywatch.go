package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

// watchPolicy reloads the policy file when it changes. A valid policy takes
// effect at once and is recorded; an invalid one is refused, recorded with
// the error, and the policy in force stays. Editors save by renaming over
// the file, so the state directory is watched, not the file.
func watchPolicy(ctx context.Context, m *guarded, log zerolog.Logger, file string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(file)); err != nil {
		w.Close()
		return err
	}
	last := fileHash(file)
	go func() {
		defer w.Close()
		var timer *time.Timer
		reload := make(chan struct{}, 1)
		// held: the hash of a policy held back for files it would guard
		// that are open for writing; it is tried again every second.
		var held string
		var retry <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Errors:
				continue
			case ev := <-w.Events:
				if filepath.Clean(ev.Name) != file {
					continue
				}
				// Let a save that writes in several steps finish.
				if timer != nil {
					timer.Stop()
				}
				timer = time.AfterFunc(100*time.Millisecond, func() {
					select {
					case reload <- struct{}{}:
					default:
					}
				})
				continue
			case <-reload:
			case <-retry:
			}
			retry = nil
			h := fileHash(file)
			if h == last || h == "" {
				held = ""
				continue
			}
			if reloadPolicy(m, log, file, h, h == held) {
				held, retry = h, time.After(time.Second)
				continue
			}
			last, held = h, ""
		}
	}()
	return nil
}

// reloadPolicy loads the policy file and puts it in force, or records why
// not. A file the policy would newly guard that is open for writing through
// a plain descriptor is held out of its guarded classes until the
// descriptor is closed (guard.SetPolicy, RW-open-writer); reloadPolicy then
// returns true, and is called again every second (again), until nothing is
// held: the held files are recorded once, and once more when guarded.
func reloadPolicy(m *guarded, log zerolog.Logger, file, hash string, again bool) (waiting bool) {
	p, err := policy.Load(file)
	r := &evidence.Record{Type: evidence.TypePolicyLoad, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Path: file, Op: "reload", UID: uint32(os.Getuid())}}
	if err != nil {
		r.Meta.Verdict, r.Meta.Reason = "deny", "invalid policy refused, the previous one stays: "+err.Error()
		log.Warn().Err(err).Msg("policy edit refused; the previous policy stays in force")
		m.setHeld(nil)
		m.record(log, r)
		return false
	}
	held, werr := m.SetPolicy(p, authorityConfig(p))
	m.setHeld(held)
	if werr != nil {
		log.Warn().Err(werr).Msg("policy edit: part of the workspace could not be read to look for files open for writing")
	}
	switch {
	case again && len(held) > 0:
		return true
	case again:
		r.Meta.Verdict, r.Meta.Reason = "allow", "policy "+hash[:12]+": the files it held back are closed, and guarded now"
		log.Info().Str("policy", file).Msg("policy in force, the files it held back included")
		m.record(log, r)
		return false
	}
	r.Meta.Verdict, r.Meta.Reason = "allow", "policy file changed: loaded "+hash[:12]
	log.Info().Str("policy", file).Msg("policy reloaded")
	m.record(log, r)
	if len(held) == 0 {
		return false
	}
	h := &evidence.Record{Type: evidence.TypePolicyLoad, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Path: file, Op: "reload", UID: uint32(os.Getuid()), Verdict: "deny", Rule: policy.RuleOpenWriter.ID(),
			Reason: "held out of the guarded classes until they are closed (tried every second): " + listSome(held, 5) +
				", open for writing through descriptors whose writes the kernel passes on without aerfs; " +
				"to end the sessions holding them: aerfs session list, then aerfs session end ID"}}
	log.Warn().Strs("files", held).Msg("policy edit: files it would guard are held back until they are no longer open for writing")
	m.record(log, h)
	return true
}

// listSome is up to n of names, and how many more.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// fileHash is the hash of the policy file's content, or, for a file
// policy.ReadFile refuses (too large, not a regular file), of its size and
// time, so that the change is still seen, refused and recorded — without
// reading a huge file into memory.
func fileHash(p string) string {
	b, err := policy.ReadFile(p)
	if err != nil {
		fi, serr := os.Stat(p)
		if serr != nil {
			return ""
		}
		b = []byte(fmt.Sprintf("unreadable %d %d %v", fi.Size(), fi.ModTime().UnixNano(), fi.Mode()))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
