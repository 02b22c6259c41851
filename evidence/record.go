package evidence

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

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
	// TypeReads lists files a session (or a process outside sessions)
	// read through the mount since its previous reads record, which it
	// names as its first parent: the chain is everything the reader read.
	// A write by that reader names the newest one as a parent.
	TypeReads = "reads"
	// TypeGC says which content blobs aerfs gc pruned (payload.pruned)
	// and under which retention (payload.detail): records are never
	// pruned, and a verifier accepts a missing blob a gc record names.
	TypeGC = "gc"
	// TypeNet is one connection of a session through aerfs's proxy:
	// the host, its channel, the verdict and rule, the bytes each way and
	// how long it lasted (payload.net).
	TypeNet = "net"
)

// Meta says when, where and by whom.
type Meta struct {
	Time    string `json:"time"` // RFC 3339, UTC, nanoseconds
	Path    string `json:"path,omitempty"`
	PathB64 string `json:"path_b64,omitempty"` // the path's bytes, standard base64, when they are not UTF-8 (then path is absent)
	Op      string `json:"op,omitempty"`
	Verdict string `json:"verdict,omitempty"` // "allow" or "deny"
	Pid     int    `json:"pid,omitempty"`
	Exe     string `json:"exe,omitempty"`
	ExeB64  string `json:"exe_b64,omitempty"` // as path_b64, for exe
	UID     uint32 `json:"uid"`
	Session string `json:"session,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Class is the authority class (none, inform, act) of the content a
	// write binds or an act-gate verdict decides on (docs/authority.md).
	Class string `json:"class,omitempty"`
	// Folded, on a refusal, is how many refusals of one kind (caller,
	// operation, path, rule) this one record stands for: the refusals a
	// caller repeated past the first few in a minute, counted instead of
	// recorded one by one. 0 for a record of one event.
	Folded int `json:"folded,omitempty"`
}

// Payload carries what a record is about, inline or by blob reference.
type Payload struct {
	OldHash string `json:"old_hash,omitempty"` // SHA-256 hex of the previous content (a blob)
	NewHash string `json:"new_hash,omitempty"` // SHA-256 hex of the new content (a blob)
	From    string `json:"from,omitempty"`
	FromB64 string `json:"from_b64,omitempty"` // as meta.path_b64, for from
	To      string `json:"to,omitempty"`
	ToB64   string `json:"to_b64,omitempty"` // as meta.path_b64, for to
	Detail  string `json:"detail,omitempty"`
	// Files lists guarded files and their content: the whole guarded state
	// for a snapshot, what changed for a restore.
	Files []FileState `json:"files,omitempty"`
	// Reads lists the files a reads record is about, each with the
	// version that was read (docs/evidence-format.md §3.2). Its hashes
	// name content, not blobs: they are not blob references.
	Reads []FileRead `json:"reads,omitempty"`
	// Pruned lists the blobs a gc record removed, sorted. Not blob
	// references: they are gone.
	Pruned []string `json:"pruned,omitempty"`
	// Net is the connection a net record is about.
	Net *NetConn `json:"net,omitempty"`
}

// NetConn is one connection a session made through aerfs's proxy
// (docs/evidence-format.md §3.5).
type NetConn struct {
	// Host is the host the session asked for, as the proxy compared it: a
	// lowercase name without a trailing dot, or an address in normal
	// form.
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Channel string `json:"channel"` // model, trusted, web or deny
	// Sent and Received count the bytes from the session to the host
	// and back (a refused connection: 0 and 0).
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
	// DurationUS is the time from the connection's decision to its end,
	// in microseconds; the record's meta.time is its end.
	DurationUS int64 `json:"duration_us"`
}

// FileRead is one file a reader read: its path and the identity of the
// version it read, exactly one of Hash (the SHA-256 of the content, when
// aerfs knew it or could compute it) and Fp (the backing file's cheap
// fingerprint when it was opened, when the content could not be hashed).
type FileRead struct {
	Path    string `json:"path,omitempty"`
	PathB64 string `json:"path_b64,omitempty"` // as meta.path_b64; exactly one of path and path_b64
	Hash    string `json:"hash,omitempty"`     // SHA-256 of the content read
	// Fp is "<dev>:<ino>:<size>:<mtime_ns>:<ctime_ns>", decimal integers.
	Fp string `json:"fp,omitempty"`
}

// FilePath is the read file's path as bytes.
func (f *FileRead) FilePath() string { return rawOf(f.Path, f.PathB64) }

// SetPath stores p in path or, when it is not UTF-8, in path_b64.
func (f *FileRead) SetPath(p string) { f.Path, f.PathB64 = split(p) }

// FileState is one file of a snapshot or a restore.
type FileState struct {
	Path    string `json:"path,omitempty"`
	PathB64 string `json:"path_b64,omitempty"` // as meta.path_b64; exactly one of path and path_b64
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

// Lossless byte-string fields (docs/evidence-format.md §3.1). Canonical
// JSON carries only UTF-8, so a path whose bytes are not UTF-8 is written
// as <name>_b64, the standard base64 of its bytes, and <name> is left out.
// A record never carries both; Validate rejects that, a _b64 value that
// is not canonical base64, and one that decodes to valid UTF-8 (which must
// be written plainly), so each byte string has exactly one encoding.

// FilePath is meta's path as bytes (from path or path_b64).
func (m *Meta) FilePath() string { return rawOf(m.Path, m.PathB64) }

// ExePath is meta's exe as bytes.
func (m *Meta) ExePath() string { return rawOf(m.Exe, m.ExeB64) }

// SetPath stores p in path or, when it is not UTF-8, in path_b64.
func (m *Meta) SetPath(p string) { m.Path, m.PathB64 = split(p) }

// FromPath is the payload's from as bytes.
func (p *Payload) FromPath() string {
	if p == nil {
		return ""
	}
	return rawOf(p.From, p.FromB64)
}

// ToPath is the payload's to as bytes.
func (p *Payload) ToPath() string {
	if p == nil {
		return ""
	}
	return rawOf(p.To, p.ToB64)
}

// FilePath is the file's path as bytes.
func (f *FileState) FilePath() string { return rawOf(f.Path, f.PathB64) }

func rawOf(plain, b64 string) string {
	if b64 == "" {
		return plain
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return plain // Validate refuses such records; never reached for a read record
	}
	return string(b)
}

func split(s string) (plain, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return "", base64.StdEncoding.EncodeToString([]byte(s))
}

// normalizeNames moves byte strings that are not UTF-8 in path-valued
// fields into their _b64 form, and makes the free-text fields valid UTF-8
// (U+FFFD for each invalid byte; they are prose, and the name itself is in
// a lossless field). Append calls it so that no name can make a record
// unrecordable.
func (r *Record) normalizeNames() {
	m := &r.Meta
	if m.PathB64 == "" && !utf8.ValidString(m.Path) {
		m.Path, m.PathB64 = split(m.Path)
	}
	if m.ExeB64 == "" && !utf8.ValidString(m.Exe) {
		m.Exe, m.ExeB64 = split(m.Exe)
	}
	for _, s := range []*string{&m.Op, &m.Session, &m.Rule, &m.Reason} {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
	}
	if p := r.Payload; p != nil {
		if p.FromB64 == "" && !utf8.ValidString(p.From) {
			p.From, p.FromB64 = split(p.From)
		}
		if p.ToB64 == "" && !utf8.ValidString(p.To) {
			p.To, p.ToB64 = split(p.To)
		}
		p.Detail = strings.ToValidUTF8(p.Detail, "\uFFFD")
		for i := range p.Files {
			f := &p.Files[i]
			if f.PathB64 == "" && !utf8.ValidString(f.Path) {
				f.Path, f.PathB64 = split(f.Path)
			}
		}
		for i := range p.Reads {
			f := &p.Reads[i]
			if f.PathB64 == "" && !utf8.ValidString(f.Path) {
				f.Path, f.PathB64 = split(f.Path)
			}
		}
	}
}

// checkB64 validates one plain/_b64 pair.
func checkB64(name, plain, b64 string) error {
	if b64 == "" {
		if !utf8.ValidString(plain) {
			return schemaErr("%s is not valid UTF-8 (write it as %s_b64)", name, name)
		}
		return nil
	}
	if plain != "" {
		return schemaErr("%s and %s_b64 are both set", name, name)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || base64.StdEncoding.EncodeToString(b) != b64 {
		return schemaErr("%s_b64 is not canonical standard base64", name)
	}
	if utf8.Valid(b) {
		return schemaErr("%s_b64 holds valid UTF-8 (write it as %s)", name, name)
	}
	return nil
}
