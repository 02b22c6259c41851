package fs

import (
	"fmt"
	"syscall"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

// # The owner's changes
//
// aerfs edit and aerfs adopt act from the owner's channel, never through
// the mount: the daemon checks the channel and records them.

// PutBlob keeps data in the blob store and returns its hash.
func (m *Monitor) PutBlob(data []byte) (string, error) { return m.rec.PutBlob(data) }

// Blob returns the content with hash h.
func (m *Monitor) Blob(h string) ([]byte, error) { return m.rec.Blob(h) }

// OwnerEdit gives the guarded file rel the content data, provided rel still
// holds base ("" = absent): an edit made against a version someone changed
// meanwhile would silently undo that change. The record mk makes is
// durable before the file changes (the one transaction, SetContent). It
// returns the new hash and the record's id.
func (m *Monitor) OwnerEdit(rel string, data []byte, base string, mk func(old, nw string) *evidence.Record) (string, string, error) {
	if r, sub, ok := m.route(rel); ok {
		return r.OwnerEdit(sub, data, base, func(old, nw string) *evidence.Record { return r.unroot(mk(old, nw)) })
	}
	if c, _, _ := m.Policy().Classify(rel); !c.Guarded() {
		return "", "", fmt.Errorf("%s is not guarded (class plain): edit it directly", rel)
	}
	h, err := m.PutBlob(data)
	if err != nil {
		return "", "", err
	}
	cur, err := m.HashRel(rel)
	if err != nil {
		return "", "", err
	}
	if cur != base {
		return "", "", fmt.Errorf("%s changed while it was being edited", rel)
	}
	_, id, err := m.SetContent(rel, h, func(old string) *evidence.Record { return mk(old, h) })
	if err != nil {
		return "", "", err
	}
	return h, id, nil
}

// Adopt makes the current content of rel the owner's: its label (EXTERNAL
// after drift, or any untrusted or tainted origin) goes, so that whoever
// reads it from now on gains no taint. The record mk makes (given the label
// removed and the content's hash) is durable before the label changes. It
// returns the label it removed, the content's hash and the record's id.
func (m *Monitor) Adopt(rel string, mk func(old *Label, h string) *evidence.Record) (*Label, string, string, error) {
	if r, sub, ok := m.route(rel); ok {
		return r.Adopt(sub, func(old *Label, h string) *evidence.Record { return r.unroot(mk(old, h)) })
	}
	if rel == "" || rel == StatusDir {
		return nil, "", "", fmt.Errorf("bad path %q", rel)
	}
	defer m.lockPaths(rel)()
	st, err := m.lstatRel(rel)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", rel, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, "", "", fmt.Errorf("%s is not a regular file", rel)
	}
	old := m.effectiveLabel(st, rel)
	if old.Clean() {
		return nil, "", "", fmt.Errorf("nothing to adopt: %s carries no label from outside the mount or from an untrusted or tainted writer", rel)
	}
	h, err := m.putBlobRel(rel)
	if err != nil {
		return nil, "", "", err
	}
	// The content may have changed between the stat and the hash: bind
	// what was hashed, or nothing.
	nst, err := m.lstatRel(rel)
	if err != nil || nst.Ino != st.Ino || !(&Label{Size: st.Size, MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano()}).fingerprintMatches(nst) {
		return nil, "", "", fmt.Errorf("%s changed while it was being adopted: try again", rel)
	}
	id, err := m.mustRecord(mk(old, h))
	if err != nil {
		return nil, "", "", err
	}
	var nl *Label
	if c, _, _ := m.Policy().Classify(rel); c.Guarded() {
		nl = &Label{Origin: policy.User, Hash: h, Record: id}
		nl.bindFingerprint(nst)
		m.mu.Lock()
		m.guarded[keyOf(nst)] = rel
		m.mu.Unlock()
		m.expect(rel, h)
	}
	if err := m.Labels.Set(keyOf(nst), nl); err != nil {
		return nil, "", "", err
	}
	m.SetLastRecord(id, rel)
	return old, h, id, nil
}
