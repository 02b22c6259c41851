package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
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
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Errors:
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
			case <-reload:
				h := fileHash(file)
				if h == last || h == "" {
					continue
				}
				last = h
				reloadPolicy(m, log, file, h)
			}
		}
	}()
	return nil
}

func reloadPolicy(m *guarded, log zerolog.Logger, file, hash string) {
	p, err := policy.Load(file)
	r := &evidence.Record{Type: evidence.TypePolicyLoad, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Path: file, Op: "reload", UID: uint32(os.Getuid())}}
	if err != nil {
		r.Meta.Verdict, r.Meta.Reason = "deny", "invalid policy refused, the previous one stays: "+err.Error()
		log.Warn().Err(err).Msg("policy edit refused; the previous policy stays in force")
	} else {
		m.SetPolicy(p, authorityConfig(p))
		r.Meta.Verdict, r.Meta.Reason = "allow", "policy file changed: loaded "+hash[:12]
		log.Info().Str("policy", file).Msg("policy reloaded")
	}
	if _, err := m.Record(r); err != nil {
		log.Error().Err(err).Msg("policy load not recorded")
	}
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
