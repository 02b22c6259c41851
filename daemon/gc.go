package daemon

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/snapshot"
)

// GCPolicy is what `aerfs gc` keeps. A blob is kept when it is one of the
// last KeepLast versions of some file, or when a record younger than
// KeepWithin refers to it; MaxSize (bytes, 0 = none) then prunes the oldest
// of the remaining blobs until the store fits. Protected blobs are never
// pruned, whatever the policy: the current content of every guarded file
// (on disk and as the log says), the content a recorded write replaced
// (crash completion needs it), pending quarantined content and its base,
// every snapshot's files and every gc manifest.
type GCPolicy struct {
	KeepLast   int
	KeepWithin time.Duration
	MaxSize    int64
}

// GCResult is what a gc did (or, dry, would do).
type GCResult struct {
	Record      string                `json:"record,omitempty"` // the gc record
	DryRun      bool                  `json:"dry_run,omitempty"`
	Pruned      []evidence.PrunedBlob `json:"pruned"`
	PrunedBytes int64                 `json:"pruned_bytes"`
	Kept        int                   `json:"kept"`
	KeptBytes   int64                 `json:"kept_bytes"`
	Protected   int                   `json:"protected"`
}

func (p GCPolicy) String() string {
	s := fmt.Sprintf("keep-last %d", p.KeepLast)
	if p.KeepWithin > 0 {
		s += ", keep-within " + p.KeepWithin.String()
	}
	if p.MaxSize > 0 {
		s += fmt.Sprintf(", max-size %d", p.MaxSize)
	}
	return s
}

// planGC decides which blobs to prune. guarded is the guarded files' content
// on disk now.
func planGC(stateDir string, x *snapshot.Index, guarded map[string]string, pol GCPolicy, now time.Time) (*GCResult, error) {
	protected := map[string]bool{}
	protect := func(h string) {
		if h != "" {
			protected[h] = true
		}
	}
	for _, h := range guarded {
		protect(h)
	}
	for _, h := range x.Current() {
		protect(h)
	}
	_, before, err := lastKnownState(stateDir)
	if err != nil {
		return nil, err
	}
	for _, h := range before {
		protect(h)
	}
	for _, p := range x.Pending() {
		protect(p.Hash)
		protect(p.BaseHash)
	}
	for _, s := range x.Snapshots() {
		st, _, err := x.SnapshotState(s.ID)
		if err != nil {
			return nil, err
		}
		for _, h := range st {
			protect(h)
		}
	}
	// Every blob a record refers to, with the time of its last reference.
	last := map[string]time.Time{}
	err = evidence.ReadAll(stateDir, func(idx int64, id string, r *evidence.Record) error {
		if r.Payload == nil {
			return nil
		}
		if r.Type == evidence.TypeGC {
			protect(r.Payload.NewHash)
		}
		t, _ := time.Parse(time.RFC3339Nano, r.Meta.Time)
		for _, h := range r.Payload.BlobRefs() {
			if t.After(last[h]) || last[h].IsZero() {
				last[h] = t
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	pathOf := map[string]string{}
	for _, p := range x.Paths() {
		hist := x.History(p)
		n := 0
		for i := len(hist) - 1; i >= 0; i-- {
			for _, h := range []string{hist[i].Hash, hist[i].OldHash} {
				if h == "" {
					continue
				}
				if _, ok := pathOf[h]; !ok {
					pathOf[h] = p
				}
			}
			if h := hist[i].Hash; h != "" && n < pol.KeepLast && !keep[h] {
				keep[h] = true
				n++
			}
		}
	}
	res := &GCResult{Pruned: []evidence.PrunedBlob{}}
	type cand struct {
		h    string
		size int64
		t    time.Time
	}
	var kept []cand
	hashes := make([]string, 0, len(last))
	for h := range last {
		hashes = append(hashes, h)
	}
	sort.Strings(hashes)
	prune := func(c cand, why string) {
		pb := evidence.PrunedBlob{Hash: c.h, Bytes: c.size, Reason: why}
		setPath(&pb, pathOf[c.h])
		res.Pruned = append(res.Pruned, pb)
		res.PrunedBytes += c.size
	}
	for _, h := range hashes {
		size, ok := evidence.BlobSize(stateDir, h)
		if !ok {
			continue // pruned before
		}
		c := cand{h, size, last[h]}
		switch {
		case protected[h]:
			res.Protected++
			res.Kept++
			res.KeptBytes += size
		case keep[h] || (pol.KeepWithin > 0 && now.Sub(last[h]) < pol.KeepWithin):
			kept = append(kept, c)
		default:
			prune(c, "retention")
		}
	}
	for _, c := range kept {
		res.KeptBytes += c.size
	}
	if pol.MaxSize > 0 {
		sort.Slice(kept, func(i, j int) bool { return kept[i].t.Before(kept[j].t) })
		for len(kept) > 0 && res.KeptBytes > pol.MaxSize {
			prune(kept[0], "max-size")
			res.KeptBytes -= kept[0].size
			kept = kept[1:]
		}
	}
	res.Kept += len(kept)
	return res, nil
}

func setPath(pb *evidence.PrunedBlob, p string) {
	if p == "" {
		return
	}
	if utf8.ValidString(p) {
		pb.Path = p
	} else {
		pb.PathB64 = base64.StdEncoding.EncodeToString([]byte(p))
	}
}

// gc prunes content blobs under the owner's retention policy. Only the
// owner's channel may ask (RO-owner); the gc is recorded, with a manifest
// of every pruned blob, before any blob is removed.
func (s *controlServer) gc(pid int, req Request) *Response {
	peer, x, unlock, refusal := s.ownerIndex(pid, "gc")
	if refusal != nil {
		return refusal
	}
	defer unlock()
	pol := GCPolicy{KeepLast: req.KeepLast, MaxSize: req.MaxSize}
	if req.KeepWithin != "" {
		d, err := time.ParseDuration(req.KeepWithin)
		if err != nil || d < 0 {
			return &Response{Error: fmt.Sprintf("bad keep-within %q", req.KeepWithin), Hint: "a duration such as 168h"}
		}
		pol.KeepWithin = d
	}
	if pol.KeepLast < 1 || pol.MaxSize < 0 {
		return &Response{Error: "keep-last must be at least 1 and max-size not negative", Hint: "aerfs gc --help"}
	}
	guarded, err := s.m.GuardedState()
	if err != nil {
		return &Response{Error: "cannot read the guarded files: " + err.Error()}
	}
	res, err := planGC(s.stateDir, x, guarded, pol, time.Now())
	if err != nil {
		return &Response{Error: "cannot plan the gc: " + err.Error()}
	}
	res.DryRun = req.DryRun
	if req.DryRun || len(res.Pruned) == 0 {
		b, _ := json.Marshal(res)
		return &Response{OK: true, Data: b}
	}
	mh, err := evidence.WriteBlob(s.stateDir, gcManifest(res, pol))
	if err != nil {
		return &Response{Error: "cannot store the gc manifest: " + err.Error()}
	}
	why := gcReason(res, pol)
	subj := peer.Subject()
	id, err := s.m.Record(&evidence.Record{Type: evidence.TypeGC, Principal: subj.Principal.String(),
		Meta: evidence.Meta{Op: "gc", Verdict: "allow", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
			Reason: why}, Payload: &evidence.Payload{NewHash: mh, Detail: why}})
	if err == nil {
		err = s.m.FlushLog()
	}
	if err != nil {
		return &Response{Error: "cannot record the gc (nothing pruned): " + err.Error()}
	}
	res.Record = id
	// A guarded file may have been written back to an old version since
	// the plan: never remove what a guarded file holds now.
	now, _ := s.m.GuardedState()
	cur := map[string]bool{}
	for _, h := range now {
		cur[h] = true
	}
	var hs []string
	for _, p := range res.Pruned {
		if !cur[p.Hash] {
			hs = append(hs, p.Hash)
		}
	}
	_, rmErr := evidence.RemoveBlobs(s.stateDir, hs)
	// A write that went back to a pruned version while the blobs were
	// removed found its content already stored: store it again from the
	// file.
	pruned := map[string]bool{}
	for _, h := range hs {
		pruned[h] = true
	}
	if after, err := s.m.GuardedState(); err == nil {
		for rel, h := range after {
			if pruned[h] {
				if b, err := os.ReadFile(filepath.Join(s.m.BackingPath(), rel)); err == nil {
					if got, err := evidence.WriteBlob(s.stateDir, b); err != nil || got != h {
						s.log.Error().Str("path", rel).Msg("gc: a guarded file holds pruned content that could not be stored again")
					}
				}
			}
		}
	}
	if rmErr != nil {
		return &Response{Error: "gc recorded as " + id[:12] + " but some blobs could not be removed: " + rmErr.Error()}
	}
	b, _ := json.Marshal(res)
	return &Response{OK: true, Data: b}
}

func gcManifest(res *GCResult, pol GCPolicy) []byte {
	man := &evidence.GCManifest{KeepLast: pol.KeepLast, MaxSize: pol.MaxSize, Pruned: res.Pruned, Kept: res.Kept, KeptBytes: res.KeptBytes}
	if pol.KeepWithin > 0 {
		man.KeepWithin = pol.KeepWithin.String()
	}
	return evidence.EncodeGCManifest(man)
}

func gcReason(res *GCResult, pol GCPolicy) string {
	return fmt.Sprintf("gc: %d content blobs (%d bytes) pruned under %s", len(res.Pruned), res.PrunedBytes, pol)
}

// GCUnmounted runs a gc directly on the state directory of a workspace
// that is not mounted. Opening the log takes its lock, so it fails while a
// daemon serves the state directory. The guarded files' current content
// is read from the workspace (every path the log knows).
func GCUnmounted(stateDir, workspace string, pol GCPolicy, dryRun bool) (*GCResult, error) {
	if pol.KeepLast < 1 || pol.MaxSize < 0 || pol.KeepWithin < 0 {
		return nil, fmt.Errorf("keep-last must be at least 1 and max-size and keep-within not negative")
	}
	l, err := evidence.Open(stateDir)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	x, err := snapshot.Load(stateDir)
	if err != nil {
		return nil, err
	}
	guarded := map[string]string{}
	for _, p := range x.Paths() {
		if h, ok := hashWorkspaceFile(workspace, p); ok {
			guarded[p] = h
		}
	}
	res, err := planGC(stateDir, x, guarded, pol, time.Now())
	if err != nil {
		return nil, err
	}
	res.DryRun = dryRun
	if dryRun || len(res.Pruned) == 0 {
		return res, nil
	}
	mh, err := l.PutBlob(gcManifest(res, pol))
	if err != nil {
		return nil, fmt.Errorf("cannot store the gc manifest: %w", err)
	}
	why := gcReason(res, pol)
	exe, _ := os.Executable()
	id, err := l.Append(&evidence.Record{Type: evidence.TypeGC, Principal: "USER",
		Meta:    evidence.Meta{Op: "gc", Verdict: "allow", Pid: os.Getpid(), Exe: exe, UID: uint32(os.Getuid()), Reason: why + " (unmounted)"},
		Payload: &evidence.Payload{NewHash: mh, Detail: why}})
	if err == nil {
		err = l.Flush() // the checkpoint covers the gc record before a blob goes
	}
	if err != nil {
		return nil, fmt.Errorf("cannot record the gc (nothing pruned): %w", err)
	}
	res.Record = id
	hs := make([]string, 0, len(res.Pruned))
	for _, p := range res.Pruned {
		hs = append(hs, p.Hash)
	}
	if _, err := evidence.RemoveBlobs(stateDir, hs); err != nil {
		return res, fmt.Errorf("gc recorded as %s but some blobs could not be removed: %w", id[:12], err)
	}
	return res, nil
}

// hashWorkspaceFile is the SHA-256 of the regular file rel below ws (no
// symlink followed at the last component).
func hashWorkspaceFile(ws, rel string) (string, bool) {
	if !filepath.IsLocal(rel) {
		return "", false
	}
	f, err := os.OpenFile(filepath.Join(ws, rel), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", false
	}
	return hex.EncodeToString(h.Sum(nil)), true
}
