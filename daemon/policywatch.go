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
		var still func() bool // whether what it held is still open
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
			if h != held {
				still = nil
			}
			if w := reloadPolicy(m, log, file, h, still); w != nil {
				held, still, retry = h, w, time.After(time.Second)
				continue
			}
			last, held, still = h, "", nil
		}
	}()
	return nil
}

// reloadPolicy loads the policy file and puts it in force, or records why
// not. A file the policy classes more strictly that is open for writing
// through a plain descriptor is held at its class in force until the
// descriptor is closed (guard.SetPolicy, RW-open-writer); reloadPolicy
// then returns what tells whether it is still held, and is called again
// every second with it (held) until nothing is held: while the held files
// are still open nothing is tried (the edit would walk the whole
// workspace again), and the held files are recorded once, and once more
// when they are in force. Files it makes secret that a process it would refuse
// has open for reading are recorded for the owner to end (RS-open-reader).
func reloadPolicy(m *guarded, log zerolog.Logger, file, hash string, held func() bool) (waiting func() bool) {
	again := held != nil
	if again && held() {
		return held // nothing to try yet: the held files are open as they were
	}
	p, err := policy.Load(file)
	r := &evidence.Record{Type: evidence.TypePolicyLoad, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Path: file, Op: "reload", UID: uint32(os.Getuid())}}
	if err != nil {
		r.Meta.Verdict, r.Meta.Reason = "deny", "invalid policy refused, the previous one stays: "+err.Error()
		log.Warn().Err(err).Msg("policy edit refused; the previous policy stays in force")
		m.setHeld(nil)
		m.record(log, r)
		return nil
	}
	roots := ""
	if cur := m.Policy(); cur != nil && cur.WithNamespacesOf(p) != cur {
		cs, csh := cur.Namespaces()
		roots = fmt.Sprintf("; the namespace roots stay %q and %q until the next mount (a root's move would carry files into a namespace behind their writers)", cs, csh)
	}
	ch, werr := m.SetPolicy(p, authorityConfig(p))
	m.setHeld(ch.Held)
	if werr != nil {
		log.Warn().Err(werr).Msg("policy edit: part of the workspace could not be read to look for open files")
	}
	note := func(rule, reason string) {
		m.record(log, &evidence.Record{Type: evidence.TypePolicyLoad, Principal: policy.Sys.String(),
			Meta: evidence.Meta{Path: file, Op: "reload", UID: uint32(os.Getuid()), Verdict: "deny", Rule: rule, Reason: reason}})
	}
	if len(ch.Exposed) > 0 {
		log.Warn().Strs("files", ch.Exposed).Msg("policy edit: files it makes secret are open for reading by processes it would refuse")
		note(RuleOpenReader, "made secret while open through descriptors the kernel serves without aerfs: "+listSome(ch.Exposed, 5)+
			"; what they read or write goes on until they are closed, and their readers are tainted SECRET_RISK; to end their sessions: aerfs session list, then aerfs session end ID")
	}
	switch {
	case again && len(ch.Held) > 0:
		return ch.StillHeld
	case again:
		r.Meta.Verdict, r.Meta.Reason = "allow", "policy "+hash[:12]+": the files it held back are closed, and in force now"
		log.Info().Str("policy", file).Msg("policy in force, the files it held back included")
		m.record(log, r)
		return nil
	}
	r.Meta.Verdict, r.Meta.Reason = "allow", "policy file changed: loaded "+hash[:12]+roots
	log.Info().Str("policy", file).Msg("policy reloaded")
	m.record(log, r)
	if len(ch.Held) == 0 {
		return nil
	}
	log.Warn().Strs("files", ch.Held).Msg("policy edit: files it classes more strictly are held back until they are no longer open for writing")
	note(policy.RuleOpenWriter.ID(), "held at their class in force until they are closed (tried every second): "+listSome(ch.Held, 5)+
		", open for writing through descriptors whose writes the kernel passes on without aerfs; "+
		"to end the sessions holding them: aerfs session list, then aerfs session end ID")
	return ch.StillHeld
}

// RuleOpenReader is the rule id of a policy edit's note that a file it
// makes secret is open for reading by a process it would refuse.
const RuleOpenReader = "RS-open-reader"

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
