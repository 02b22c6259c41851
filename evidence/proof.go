package evidence

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// InclusionProof proves that record Index with id ID is leaf Index of the
// tree whose signed checkpoint is Checkpoint. Proof is the RFC 6962 audit
// path, lowercase hex, leaf side first (tlog.RecordProof order).
type InclusionProof struct {
	Index      int64    `json:"idx"`
	ID         string   `json:"id"`
	TreeSize   int64    `json:"tree_size"`
	Root       string   `json:"root_hash"`
	Proof      []string `json:"proof"`
	Checkpoint string   `json:"checkpoint"`
}

// ConsistencyProof proves that the tree of size OldSize is a prefix of the
// tree of size NewSize (RFC 6962 consistency proof, lowercase hex).
type ConsistencyProof struct {
	OldSize int64    `json:"old_size"`
	NewSize int64    `json:"new_size"`
	Proof   []string `json:"proof"`
}

// Prove returns the inclusion proof of record idx against stateDir's
// current checkpoint.
func Prove(stateDir string, idx int64) (*InclusionProof, error) {
	rd, err := openReader(stateDir)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	if idx < 0 || idx >= rd.cp.Size {
		return nil, fmt.Errorf("evidence: record %d is not covered by the checkpoint (size %d)", idx, rd.cp.Size)
	}
	_, _, id, err := readEntry(rd.index, idx)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	p, err := tlog.ProveRecord(rd.cp.Size, idx, rd.hashReader())
	if err != nil {
		return nil, fmt.Errorf("evidence: prove record %d: %w", idx, err)
	}
	return &InclusionProof{
		Index: idx, ID: hex.EncodeToString(id[:]), TreeSize: rd.cp.Size,
		Root: rd.cp.RootHex(), Proof: hashesHex(p), Checkpoint: string(rd.cpRaw),
	}, nil
}

// ProveID is Prove for the record with the given id.
func ProveID(stateDir, id string) (*InclusionProof, error) {
	if !IsHash(id) {
		return nil, fmt.Errorf("evidence: %q is not a record id", id)
	}
	found, err := LookupID(stateDir, id)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("evidence: record %s is not in the log", id)
	}
	return Prove(stateDir, found[0])
}

// Verify checks the checkpoint's signature against pubkey and the proof
// against the checkpoint.
func (p *InclusionProof) Verify(pubkey string) error {
	cp, err := OpenCheckpoint([]byte(p.Checkpoint), pubkey)
	if err != nil {
		return err
	}
	if cp.Size != p.TreeSize || cp.RootHex() != p.Root {
		return verr(KindIntegrity, "proof: tree size or root does not match the checkpoint")
	}
	return checkInclusion(p.Index, p.ID, p.Proof, cp)
}

func checkInclusion(idx int64, id string, proof []string, cp Checkpoint) error {
	var raw [32]byte
	if !IsHash(id) {
		return verr(KindSchema, "record %d: id %q is not lowercase hex SHA-256", idx, id)
	}
	hex.Decode(raw[:], []byte(id))
	rp, err := parseHashes(proof)
	if err != nil {
		return prefix(fmt.Sprintf("record %d: proof", idx), err)
	}
	if idx < 0 || idx >= cp.Size {
		return verr(KindIntegrity, "record %d: index outside tree of size %d", idx, cp.Size)
	}
	if tlog.CheckRecord(rp, cp.Size, cp.Root, idx, leafHash(raw)) != nil {
		return verr(KindIntegrity, "record %d: inclusion proof does not match checkpoint", idx)
	}
	return nil
}

// String renders the proof for humans (`aerfs prove`).
func (p *InclusionProof) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "record %d\nid %s\ntree size %d\nroot %s\nproof:\n", p.Index, p.ID, p.TreeSize, p.Root)
	for _, h := range p.Proof {
		fmt.Fprintf(&b, "  %s\n", h)
	}
	b.WriteString("checkpoint:\n")
	b.WriteString(p.Checkpoint)
	return b.String()
}

// JSON renders the proof as JSON (`aerfs prove --json`).
func (p *InclusionProof) JSON() ([]byte, error) { return json.MarshalIndent(p, "", "  ") }

// ProveConsistency proves that the tree of oldSize records is a prefix of
// stateDir's current checkpoint.
func ProveConsistency(stateDir string, oldSize int64) (*ConsistencyProof, error) {
	rd, err := openReader(stateDir)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	if oldSize < 0 || oldSize > rd.cp.Size {
		return nil, fmt.Errorf("evidence: old size %d is outside 0..%d", oldSize, rd.cp.Size)
	}
	p, err := tlog.ProveTree(rd.cp.Size, oldSize, rd.hashReader())
	if err != nil {
		return nil, fmt.Errorf("evidence: prove consistency: %w", err)
	}
	return &ConsistencyProof{OldSize: oldSize, NewSize: rd.cp.Size, Proof: hashesHex(p)}, nil
}

// CheckConsistency verifies both checkpoints against pubkey and checks
// that proof shows the newer tree extends the older one. It is how a
// witness holding an old checkpoint detects a rewritten history.
func CheckConsistency(oldCheckpoint, newCheckpoint []byte, pubkey string, proof *ConsistencyProof) error {
	o, err := OpenCheckpoint(oldCheckpoint, pubkey)
	if err != nil {
		return prefix("old", err)
	}
	n, err := OpenCheckpoint(newCheckpoint, pubkey)
	if err != nil {
		return prefix("new", err)
	}
	if o.Size > n.Size {
		return verr(KindIntegrity, "consistency: old tree (%d) is larger than new tree (%d)", o.Size, n.Size)
	}
	if proof == nil || proof.OldSize != o.Size || proof.NewSize != n.Size {
		return verr(KindIntegrity, "consistency: proof is for different tree sizes")
	}
	tp, err := parseHashes(proof.Proof)
	if err != nil {
		return prefix("consistency: proof", err)
	}
	if tlog.CheckTree(tp, n.Size, n.Root, o.Size, o.Root) != nil {
		return verr(KindIntegrity, "consistency: tree %d is not a prefix of tree %d", o.Size, n.Size)
	}
	return nil
}

func hashesHex(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h[:])
	}
	return out
}

func parseHashes(ss []string) ([]tlog.Hash, error) {
	if len(ss) > 64 {
		return nil, verr(KindSchema, "%d hashes, at most 64 are possible", len(ss))
	}
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		if !IsHash(s) {
			return nil, verr(KindSchema, "hash %d %q is not lowercase hex SHA-256", i, s)
		}
		hex.Decode(out[i][:], []byte(s))
	}
	return out, nil
}

// rootBuilder computes an RFC 6962 root from leaves in order with
// O(log n) memory: the verifier recomputes the root itself instead of
// trusting any stored interior hash.
type rootBuilder struct {
	stack []tlog.Hash // perfect subtrees, largest first
	sizes []int64
	n     int64
}

func (b *rootBuilder) add(leaf tlog.Hash) {
	h, s := leaf, int64(1)
	for len(b.sizes) > 0 && b.sizes[len(b.sizes)-1] == s {
		h = tlog.NodeHash(b.stack[len(b.stack)-1], h)
		s *= 2
		b.stack = b.stack[:len(b.stack)-1]
		b.sizes = b.sizes[:len(b.sizes)-1]
	}
	b.stack = append(b.stack, h)
	b.sizes = append(b.sizes, s)
	b.n++
}

func (b *rootBuilder) root() tlog.Hash {
	if b.n == 0 {
		h, _ := tlog.TreeHash(0, nil)
		return h
	}
	h := b.stack[len(b.stack)-1]
	for i := len(b.stack) - 2; i >= 0; i-- {
		h = tlog.NodeHash(b.stack[i], h)
	}
	return h
}
