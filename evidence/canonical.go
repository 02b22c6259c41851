package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxRecordSize bounds one record's canonical JSON. The daemon keeps file
// contents in blobs, so a record is metadata; a bigger one is a bug or an
// attack on the reader.
const MaxRecordSize = 1 << 20

// maxParents bounds the provenance fan-in of one record.
const maxParents = 4096

// maxJSONDepth bounds nesting in every JSON file this package reads.
const maxJSONDepth = 16

// Principals, as named in records (DESIGN.md §3).
var principals = map[string]bool{
	"SYS": true, "USER": true, "TOOL_AUTH": true, "TOOL_UNAUTH": true,
	"WEB": true, "SKILL": true, "CHANNEL": true, "EXTERNAL": true,
}

// Taint flags, as named in records (DESIGN.md §3).
var taints = map[string]bool{
	"UNTRUSTED": true, "INJECTION_SUSPECT": true, "PROXY_DERIVED": true,
	"SECRET_RISK": true, "CROSS_SESSION": true, "TOOL_OUTPUT": true,
	"SKILL_OUTPUT": true, "WEB_DERIVED": true,
}

// RecordTypes lists every record type this format knows, sorted: the one
// list a reader's type filter accepts.
func RecordTypes() []string {
	out := make([]string, 0, len(recordTypes))
	for t := range recordTypes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

var recordTypes = map[string]bool{
	TypeVerdict: true, TypeWrite: true, TypeRename: true, TypeDelete: true,
	TypeSessionStart: true, TypeSessionEnd: true, TypePromote: true,
	TypeTaint: true, TypePolicyLoad: true, TypeMount: true, TypeUnmount: true,
	TypeRecovery: true, TypeSnapshot: true, TypeRestore: true, TypeDrift: true,
	TypeQuarantine: true, TypeApprove: true, TypeReject: true,
	TypeDeclassify: true, TypeElevate: true, TypeReads: true, TypeGC: true,
	TypeNet: true,
}

// timeRE is RFC 3339 restricted to UTC ("Z") with 0 to 9 fraction digits.
var timeRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$`)

// FormatTime is how Append stamps Meta.Time.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseTime accepts exactly the times a record may carry.
func ParseTime(s string) (time.Time, error) {
	if !timeRE.MatchString(s) {
		return time.Time{}, fmt.Errorf("time %q is not RFC 3339 UTC (YYYY-MM-DDThh:mm:ss[.fraction]Z)", s)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %v", s, err)
	}
	return t, nil
}

// IsHash reports whether s is a lowercase hex SHA-256.
func IsHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func schemaErr(format string, args ...any) *VerifyError { return verr(KindSchema, format, args...) }

// Validate checks r against the record schema (docs/evidence-format.md §3)
// without encoding it.
func (r *Record) Validate() error {
	if r.Version != RecordVersion {
		return schemaErr("unsupported record version %d", r.Version)
	}
	if !recordTypes[r.Type] {
		return schemaErr("unknown type %q", r.Type)
	}
	if !principals[r.Principal] {
		return schemaErr("unknown principal %q", r.Principal)
	}
	if r.Taint == nil {
		return schemaErr("taint must be an array")
	}
	seen := make(map[string]bool, len(r.Taint))
	for _, t := range r.Taint {
		if !taints[t] {
			return schemaErr("unknown taint %q", t)
		}
		if seen[t] {
			return schemaErr("duplicate taint %q", t)
		}
		seen[t] = true
	}
	if r.Parents == nil {
		return schemaErr("parents must be an array")
	}
	if len(r.Parents) > maxParents {
		return schemaErr("%d parents, limit %d", len(r.Parents), maxParents)
	}
	seenP := make(map[string]bool, len(r.Parents))
	for _, p := range r.Parents {
		if !IsHash(p) {
			return schemaErr("parent %q is not a lowercase hex SHA-256", p)
		}
		if seenP[p] {
			return schemaErr("duplicate parent %s", p)
		}
		seenP[p] = true
	}
	m := &r.Meta
	if _, err := ParseTime(m.Time); err != nil {
		return schemaErr("meta.%v", err)
	}
	switch m.Class {
	case "", "none", "inform", "act":
	default:
		return schemaErr("meta.class %q is not none, inform or act", m.Class)
	}
	switch m.Verdict {
	case "", "allow", "deny":
	default:
		return schemaErr("meta.verdict %q is not allow or deny", m.Verdict)
	}
	if m.Pid < 0 || m.Pid > 1<<31-1 {
		return schemaErr("meta.pid %d out of range", m.Pid)
	}
	if m.Folded < 0 || m.Folded > 1<<31-1 {
		return schemaErr("meta.folded %d out of range", m.Folded)
	}
	if m.Folded > 0 && m.Verdict != "deny" {
		return schemaErr("meta.folded on a record that is not a refusal")
	}
	if err := checkB64("meta.path", m.Path, m.PathB64); err != nil {
		return err
	}
	if err := checkB64("meta.exe", m.Exe, m.ExeB64); err != nil {
		return err
	}
	for name, s := range map[string]string{
		"meta.op": m.Op, "meta.session": m.Session, "meta.rule": m.Rule, "meta.reason": m.Reason,
	} {
		if !utf8.ValidString(s) {
			return schemaErr("%s is not valid UTF-8", name)
		}
	}
	if p := r.Payload; p != nil {
		for name, h := range map[string]string{"payload.old_hash": p.OldHash, "payload.new_hash": p.NewHash} {
			if h != "" && !IsHash(h) {
				return schemaErr("%s %q is not a lowercase hex SHA-256", name, h)
			}
		}
		if err := checkB64("payload.from", p.From, p.FromB64); err != nil {
			return err
		}
		if err := checkB64("payload.to", p.To, p.ToB64); err != nil {
			return err
		}
		if !utf8.ValidString(p.Detail) {
			return schemaErr("payload.detail is not valid UTF-8")
		}
		if p.Files != nil && len(p.Files) == 0 {
			return schemaErr("payload.files is empty (omit it)")
		}
		for i, f := range p.Files {
			if f.Path == "" && f.PathB64 == "" {
				return schemaErr("payload.files[%d] has neither path nor path_b64", i)
			}
			if err := checkB64(fmt.Sprintf("payload.files[%d].path", i), f.Path, f.PathB64); err != nil {
				return err
			}
			for name, h := range map[string]string{"hash": f.Hash, "old_hash": f.OldHash} {
				if h != "" && !IsHash(h) {
					return schemaErr("payload.files[%d].%s %q is not a lowercase hex SHA-256", i, name, h)
				}
			}
		}
		if err := validateReads(p.Reads); err != nil {
			return err
		}
		if p.Pruned != nil && len(p.Pruned) == 0 {
			return schemaErr("payload.pruned is empty (omit it)")
		}
		for i, h := range p.Pruned {
			if !IsHash(h) {
				return schemaErr("payload.pruned[%d] %q is not a lowercase hex SHA-256", i, h)
			}
			if i > 0 && p.Pruned[i-1] >= h {
				return schemaErr("payload.pruned is not sorted and unique at %d", i)
			}
		}
		if len(p.Pruned) > 0 && r.Type != TypeGC {
			return schemaErr("payload.pruned in a %s record (only gc)", r.Type)
		}
	}
	if r.Type == TypeGC && (r.Payload == nil || len(r.Payload.Pruned) == 0) {
		return schemaErr("gc record without payload.pruned")
	}
	if r.Payload != nil && r.Payload.Net != nil {
		if r.Type != TypeNet {
			return schemaErr("payload.net in a %s record (only net)", r.Type)
		}
		if err := validateNet(r.Payload.Net); err != nil {
			return err
		}
	} else if r.Type == TypeNet {
		return schemaErr("net record without payload.net")
	}
	return nil
}

// maxJSONInt is the largest integer every JSON reader keeps exactly.
const maxJSONInt = 1<<53 - 1

var netChannels = map[string]bool{"model": true, "trusted": true, "web": true, "deny": true}

func validateNet(n *NetConn) error {
	if n.Host == "" || len(n.Host) > 253 {
		return schemaErr("payload.net.host is empty or longer than 253 bytes")
	}
	for i := 0; i < len(n.Host); i++ {
		c := n.Host[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			return schemaErr("payload.net.host %q has %q (a lowercase name or an address)", n.Host, string(c))
		}
	}
	if n.Port < 1 || n.Port > 65535 {
		return schemaErr("payload.net.port %d out of range", n.Port)
	}
	if !netChannels[n.Channel] {
		return schemaErr("payload.net.channel %q is not model, trusted, web or deny", n.Channel)
	}
	for name, v := range map[string]int64{"sent": n.Sent, "received": n.Received, "duration_us": n.DurationUS} {
		if v < 0 || v > maxJSONInt {
			return schemaErr("payload.net.%s %d out of range", name, v)
		}
	}
	return nil
}

// canonicalJCS is the reference path: encoding/json, then the RFC 8785
// transform. Tests hold appendCanonical to it.
func canonicalJCS(r *Record) ([]byte, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// Canonical returns the RFC 8785 canonical JSON of r after validating it.
// It never changes r: Append fills defaults before calling it.
func (r *Record) Canonical() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	c := appendCanonical(make([]byte, 0, 512), r)
	if len(c) > MaxRecordSize {
		return nil, schemaErr("record is %d bytes, limit %d", len(c), MaxRecordSize)
	}
	return c, nil
}

// ID returns the record id: hex SHA-256 of the canonical JSON.
func (r *Record) ID() (string, error) {
	c, err := r.Canonical()
	if err != nil {
		return "", err
	}
	return IDOf(c), nil
}

// IDOf is the id of a record given its canonical bytes.
func IDOf(canonical []byte) string {
	s := sha256.Sum256(canonical)
	return hex.EncodeToString(s[:])
}

// ParseRecord decodes one record and accepts it only if data is exactly
// its canonical form: that makes the bytes, the id and the decoded value
// one thing, so nothing can hide in whitespace, escapes, key order,
// duplicate keys or number spelling.
func ParseRecord(data []byte) (*Record, error) {
	if len(data) > MaxRecordSize {
		return nil, schemaErr("record is %d bytes, limit %d", len(data), MaxRecordSize)
	}
	// Fast path: decode, then demand byte equality with the canonical
	// form. Duplicate keys, null, whitespace, escapes and key order all
	// make the bytes differ; the slow path below only names the cause.
	if !utf8.Valid(data) {
		return nil, schemaErr("invalid UTF-8")
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		if serr := scanStrict(data); serr != nil {
			return nil, serr
		}
		return nil, schemaErr("%s", jsonErrText(err))
	}
	if dec.InputOffset() != int64(len(data)) {
		return nil, schemaErr("trailing data after JSON value")
	}
	c, err := r.Canonical()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(c, data) {
		if serr := scanStrict(data); serr != nil {
			return nil, serr
		}
		if f := missingRecordField(data); f != "" {
			return nil, schemaErr("missing required field %s", f)
		}
		return nil, schemaErr("not in canonical form (RFC 8785)")
	}
	return &r, nil
}

// missingRecordField explains the usual reason a decodable record is not
// canonical. Only called on the error path.
func missingRecordField(data []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return ""
	}
	for _, k := range []string{"v", "type", "principal", "taint", "parents", "meta"} {
		if _, ok := top[k]; !ok {
			return k
		}
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["meta"], &meta) != nil {
		return ""
	}
	for _, k := range []string{"time", "uid"} {
		if _, ok := meta[k]; !ok {
			return "meta." + k
		}
	}
	return ""
}

// strictUnmarshal decodes one JSON value into v, rejecting invalid UTF-8,
// duplicate keys, null, unknown fields, wrong types and trailing data.
func strictUnmarshal(data []byte, v any) error {
	if !utf8.Valid(data) {
		return schemaErr("invalid UTF-8")
	}
	if err := scanStrict(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return schemaErr("%s", jsonErrText(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return schemaErr("trailing data after JSON value")
	}
	return nil
}

// requireKeys checks that the JSON object data has every listed member;
// path "a.b" looks inside member a. Go's decoder leaves absent members at
// their zero value, which must not pass for a present one.
func requireKeys(data []byte, keys ...string) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return schemaErr("%v", err)
	}
	for _, k := range keys {
		obj := top
		name := k
		if a, b, ok := strings.Cut(k, "."); ok {
			var sub map[string]json.RawMessage
			if json.Unmarshal(obj[a], &sub) != nil {
				return schemaErr("missing required field %s", a)
			}
			obj, name = sub, b
		}
		if _, ok := obj[name]; !ok {
			return schemaErr("missing required field %s", k)
		}
	}
	return nil
}

func jsonErrText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %s: wrong type (%s, want %s)", te.Field, te.Value, te.Type)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + f
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// scanStrict walks the token stream once: the standard decoder silently
// keeps the last of duplicate keys and treats null as "leave unset", both
// of which would let two different byte strings decode to one value.
func scanStrict(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // object: next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return schemaErr("truncated JSON")
			}
			return nil
		}
		if err != nil {
			return schemaErr("malformed JSON: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k, ok := tok.(string)
			if !ok {
				return schemaErr("malformed JSON: object key is not a string")
			}
			if top.keys[k] {
				return schemaErr("duplicate key %q", k)
			}
			top.keys[k] = true
			top.expect = false
			continue
		}
		if top != nil && top.obj {
			top.expect = true
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
			case '[':
				stack = append(stack, &frame{})
			case ']', '}':
				stack = stack[:len(stack)-1]
			}
			if len(stack) > maxJSONDepth {
				return schemaErr("JSON nested deeper than %d", maxJSONDepth)
			}
		case nil:
			return schemaErr("null is not allowed")
		}
		if len(stack) == 0 {
			// One top-level value only.
			if dec.More() {
				return schemaErr("trailing data after JSON value")
			}
		}
	}
}
