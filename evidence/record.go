package evidence

// Record is one entry of the evidence log. Its id is the SHA-256 of its
// canonical JSON (RFC 8785).
type Record struct {
	// Version is the record format version (RecordVersion). Append fills
	// it when zero; verifiers reject any other value.
	Version   int      `json:"v"`
	Type      string   `json:"type"`
	Principal string   `json:"principal"`
	Taint     []string `json:"taint"`
	Parents   []string `json:"parents"`
	Meta      Meta     `json:"meta"`
	Payload   *Payload `json:"payload,omitempty"`
}

// RecordVersion is the only record format version this package writes and
// reads. A record with another "v" is rejected, never guessed at.
const RecordVersion = 1

// Record types.
const (
	TypeVerdict      = "verdict"
	TypeWrite        = "write"
	TypeRename       = "rename"
	TypeDelete       = "delete"
	TypeSessionStart = "session_start"
	TypeSessionEnd   = "session_end"
	TypePromote      = "promote"
	TypeTaint        = "taint"
	TypePolicyLoad   = "policy_load"
	TypeMount        = "mount"
	TypeUnmount      = "unmount"
	TypeRecovery     = "recovery"
	TypeSnapshot     = "snapshot"
	TypeRestore      = "restore"
	TypeDrift        = "drift"
	TypeQuarantine   = "quarantine"
	TypeApprove      = "approve"
	TypeReject       = "reject"
	TypeDeclassify   = "declassify"
	TypeElevate      = "elevate"
)

// Meta says when, where and by whom.
type Meta struct {
	Time    string `json:"time"` // RFC 3339, UTC, nanoseconds
	Path    string `json:"path,omitempty"`
	Op      string `json:"op,omitempty"`
	Verdict string `json:"verdict,omitempty"` // "allow" or "deny"
	Pid     int    `json:"pid,omitempty"`
	Exe     string `json:"exe,omitempty"`
	UID     uint32 `json:"uid"`
	Session string `json:"session,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Payload carries what a record is about, inline or by blob reference.
type Payload struct {
	OldHash string `json:"old_hash,omitempty"` // SHA-256 hex of the previous content (a blob)
	NewHash string `json:"new_hash,omitempty"` // SHA-256 hex of the new content (a blob)
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Files lists guarded files and their content: the whole guarded state
	// for a snapshot, what changed for a restore.
	Files []FileState `json:"files,omitempty"`
}

// FileState is one file of a snapshot or a restore.
type FileState struct {
	Path    string `json:"path"`
	OldHash string `json:"old_hash,omitempty"` // content before (restore)
	Hash    string `json:"hash,omitempty"`     // content after; "" = absent
}

// BlobRefs lists every content hash the payload refers to: each must be a
// stored blob, and a bundle carries them all.
func (p *Payload) BlobRefs() []string {
	if p == nil {
		return nil
	}
	var out []string
	add := func(h string) {
		if h != "" {
			out = append(out, h)
		}
	}
	add(p.OldHash)
	add(p.NewHash)
	for _, f := range p.Files {
		add(f.OldHash)
		add(f.Hash)
	}
	return out
}
