// Package report renders a verified evidence bundle as one self-contained
// HTML page: a timeline of sessions and verdicts, the refusals by rule and
// principal, the provenance graph of a source, and the diffs of every
// guarded change. The page references nothing outside itself and runs no
// script; every string taken from the bundle is escaped.
package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/internal/printable"
)

// Entry is one record of the bundle.
type Entry struct {
	Idx  int64
	ID   string
	Rec  *evidence.Record
	Time time.Time
	// Path is meta.path for display: a path carried as base64
	// (meta.path_b64) is decoded, and bytes that are not UTF-8 are shown
	// as \xNN escapes.
	Path string
}

// Bundle is the content of a verified bundle.
type Bundle struct {
	Manifest evidence.Manifest
	Entries  []Entry
	blobs    map[string][]byte
}

// Blob returns the content with SHA-256 hash, if the bundle carries it.
func (b *Bundle) Blob(hash string) ([]byte, bool) {
	d, ok := b.blobs[hash]
	return d, ok
}

// Trust says what verified the bundle and how far that goes.
type Trust struct {
	Source    string // the bundle, or the state directory it was exported from
	Origin    string
	TreeSize  int64
	Root      string
	Complete  bool
	KeyID     string // the note key hash
	PublicKey string // the verifier key text
	// Fingerprint is the SHA-256 of the verifier key text, hex.
	Fingerprint string
	// Pinned is true when the user named the key (--key); otherwise the
	// key is the bundle's (or state directory's) own and proves integrity
	// only, not origin.
	Pinned bool
	// StateKey is true when the key is the state directory's own
	// (key.pub), read by aerfs report from the workspace it reports on:
	// the same key aerfs verify --state checks the live log against.
	StateKey  bool
	KeySource string // human words for where the key came from
}

// Fingerprint is the SHA-256 of a verifier key's text, hex.
func Fingerprint(key string) string {
	s := sha256.Sum256([]byte(strings.TrimSpace(key)))
	return hex.EncodeToString(s[:])
}

// Open reads the bundle at path (a directory or a .zip) once, verifies
// exactly the bytes it read, and parses them: a bundle changed while it is
// read cannot show one content to the verifier and another to the page.
// key is the trusted verifier key; "" trusts the bundle's own key
// (integrity, not origin).
func Open(path, key string, lim evidence.Limits) (*Bundle, Trust, error) {
	return OpenProgress(path, key, lim, nil)
}

// OpenProgress is Open, telling p how far the verification ("records")
// and the parsing ("parsing") have come.
func OpenProgress(path, key string, lim evidence.Limits, p evidence.Progress) (*Bundle, Trust, error) {
	files, err := evidence.ReadBundleFiles(path, lim)
	if err != nil {
		return nil, Trust{}, err
	}
	rep, err := evidence.VerifyBundleFiles(files, key, p)
	if err != nil {
		return nil, Trust{}, err
	}
	b, err := parse(files, p)
	if err != nil {
		return nil, Trust{}, err
	}
	pub := key
	if pub == "" {
		pub = b.Manifest.PublicKey
	}
	t := Trust{
		Source: path, Origin: rep.Origin, TreeSize: rep.TreeSize, Root: rep.Root, Complete: rep.Complete,
		KeyID: rep.KeyID, PublicKey: pub, Fingerprint: Fingerprint(pub), Pinned: key != "",
		KeySource: "the bundle's own key",
	}
	if t.Pinned {
		t.KeySource = "a key given with --key"
	}
	return b, t, nil
}

// parse reads the manifest, the records with their index lines, and the
// blobs of an already verified bundle.
func parse(files map[string][]byte, p evidence.Progress) (*Bundle, error) {
	b := &Bundle{blobs: map[string][]byte{}}
	if err := json.Unmarshal(files["manifest.json"], &b.Manifest); err != nil {
		return nil, fmt.Errorf("report: manifest: %v", err)
	}
	recs := lines(files["records.jsonl"])
	idxs := lines(files["index.jsonl"])
	if len(recs) != len(idxs) {
		return nil, fmt.Errorf("report: %d records, %d index lines", len(recs), len(idxs))
	}
	for i, line := range recs {
		if p != nil && (i%1024 == 0 || i == len(recs)-1) {
			p("parsing", int64(i+1), int64(len(recs)))
		}
		var il struct {
			Idx int64  `json:"idx"`
			ID  string `json:"id"`
		}
		if err := json.Unmarshal(idxs[i], &il); err != nil {
			return nil, fmt.Errorf("report: index line %d: %v", i+1, err)
		}
		r, err := evidence.ParseRecord(line)
		if err != nil {
			return nil, fmt.Errorf("report: record %d: %v", il.Idx, err)
		}
		t, _ := evidence.ParseTime(r.Meta.Time)
		b.Entries = append(b.Entries, Entry{Idx: il.Idx, ID: il.ID, Rec: r, Time: t, Path: displayPath(r, line)})
	}
	for name, data := range files {
		if h, ok := strings.CutPrefix(name, "blobs/"); ok {
			b.blobs[h] = data
		}
	}
	return b, nil
}

func lines(b []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// displayPath is a record's meta.path as text for the page. A record may
// carry a path that is not UTF-8 as meta.path_b64; it is decoded and its
// invalid bytes are escaped.
func displayPath(r *evidence.Record, raw []byte) string {
	if r.Meta.Path != "" {
		return Printable(r.Meta.Path)
	}
	if r.Payload != nil && r.Payload.Net != nil {
		// A connection through a session's proxy: its host.
		return Printable(net.JoinHostPort(r.Payload.Net.Host, strconv.Itoa(r.Payload.Net.Port)))
	}
	var x struct {
		Meta struct {
			PathB64 string `json:"path_b64"`
		} `json:"meta"`
	}
	if json.Unmarshal(raw, &x) != nil || x.Meta.PathB64 == "" {
		return ""
	}
	d, err := base64.StdEncoding.DecodeString(x.Meta.PathB64)
	if err != nil {
		return "(undecodable path)"
	}
	return Printable(string(d))
}

// Printable shows bytes that are not valid UTF-8, control characters and
// the invisible characters that reorder or hide text (bidirectional
// overrides, zero-width marks) as escapes, and cuts very long lines, so
// that every name on the page is what the file system has and reads as it
// is stored: the one printable-text function (internal/printable).
func Printable(s string) string { return printable.Line(s) }

// printableText is Printable; keepTab leaves tabs as they are (a line of file
// content, without its newline).
func printableText(s string, keepTab bool) string {
	if keepTab {
		return printable.Text(s)
	}
	return printable.Line(s)
}
