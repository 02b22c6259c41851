package fs

import (
	"fmt"
	"syscall"

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
// meanwhile would silently undo that change. It returns the new hash.
func (m *Monitor) OwnerEdit(rel string, data []byte, base string) (string, error) {
	if c, _, _ := m.Policy().Classify(rel); !c.Guarded() {
		return "", fmt.Errorf("%s is not guarded (class plain): edit it directly", rel)
	}
	h, err := m.PutBlob(data)
	if err != nil {
		return "", err
	}
	cur, err := m.HashRel(rel)
	if err != nil {
		return "", err
	}
	if cur != base {
		return "", fmt.Errorf("%s changed while it was being edited", rel)
	}
	if _, err := m.SetContent(rel, h); err != nil {
		return "", err
	}
	return h, nil
}

// Adopt makes the current content of rel the owner's: its label (EXTERNAL
// after drift, or any untrusted or tainted origin) goes, so that whoever
// reads it from now on gains no taint. It returns the label it removed and
// the content's hash.
func (m *Monitor) Adopt(rel string) (*Label, string, error) {
	if rel == "" || rel == StatusDir {
		return nil, "", fmt.Errorf("bad path %q", rel)
	}
	defer m.lockPath(rel)()
	st, err := m.lstatRel(rel)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", rel, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, "", fmt.Errorf("%s is not a regular file", rel)
	}
	old := m.effectiveLabel(st, rel)
	if old.Clean() {
		return nil, "", fmt.Errorf("nothing to adopt: %s carries no label from outside the mount or from an untrusted or tainted writer", rel)
	}
	h, err := m.putBlobRel(rel)
	if err != nil {
		return nil, "", err
	}
	// The content may have changed between the stat and the hash: bind
	// what was hashed, or nothing.
	nst, err := m.lstatRel(rel)
	if err != nil || nst.Ino != st.Ino || !(&Label{Size: st.Size, MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano()}).fingerprintMatches(nst) {
		return nil, "", fmt.Errorf("%s changed while it was being adopted: try again", rel)
	}
	var nl *Label
	if c, _, _ := m.Policy().Classify(rel); c.Guarded() {
		nl = &Label{Origin: policy.User, Hash: h}
		nl.bindFingerprint(nst)
		m.mu.Lock()
		m.guarded[keyOf(nst)] = rel
		m.mu.Unlock()
		m.expect(rel, h)
	}
	if err := m.Labels.Set(keyOf(nst), nl); err != nil {
		return nil, "", err
	}
	return old, h, nil
}
