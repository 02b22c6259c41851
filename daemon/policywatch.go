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
// not. It returns true when the policy is held back, to be tried again: it
// would guard files open for writing through plain descriptors, whose later
// writes the kernel serves without aerfs (they would change a guarded file
// undecided and unrecorded, RW-open-writer). again: the same policy was
// held back before (recorded then, not again).
func reloadPolicy(m *guarded, log zerolog.Logger, file, hash string, again bool) (held bool) {
	p, err := policy.Load(file)
	r := &evidence.Record{Type: evidence.TypePolicyLoad, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Path: file, Op: "reload", UID: uint32(os.Getuid())}}
	if err != nil {
		r.Meta.Verdict, r.Meta.Reason = "deny", "invalid policy refused, the previous one stays: "+err.Error()
		log.Warn().Err(err).Msg("policy edit refused; the previous policy stays in force")
	} else if busy, werr := m.OpenToGuard(p); len(busy) > 0 || werr != nil {
		if again {
			return true
		}
		why := "it guards files open for writing through descriptors whose writes the kernel serves without aerfs: " + listSome(busy, 5)
		if werr != nil {
			why = "the files open for writing could not all be checked against it (" + werr.Error() + ")"
		}
		r.Meta.Verdict, r.Meta.Rule = "deny", policy.RuleOpenWriter.ID()
		r.Meta.Reason = "policy edit held back, the previous one stays until they are closed (tried every second): " + why +
			"; to end the sessions holding them: aerfs session list, then aerfs session end ID"
		log.Warn().Strs("files", busy).Err(werr).Msg("policy edit held back until files it would guard are no longer open for writing")
		held = true
	} else {
		m.SetPolicy(p, authorityConfig(p))
		r.Meta.Verdict, r.Meta.Reason = "allow", "policy file changed: loaded "+hash[:12]
		log.Info().Str("policy", file).Msg("policy reloaded")
	}
	if _, err := m.Record(r); err != nil {
		log.Error().Err(err).Msg("policy load not recorded")
	}
	return held
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
