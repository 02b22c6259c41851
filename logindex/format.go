package logindex

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Names inside <stateDir>/evidence/ix (docs/evidence-format.md §11).
const (
	dirName   = "ix"
	headName  = "head"
	headMagic = "aerfs-index 1"
	segMagic  = "aerfs-x1"
	segFooter = "aerfs-xb"
	stMagic   = "aerfs-s1"
	// blockSize is the unit a segment's content is hashed in: a reader
	// checks only the blocks it reads.
	blockSize = 16 << 10
)

// ErrFormat is wrapped by every error about bytes that do not parse.
var ErrFormat = errors.New("logindex: malformed")

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// Hash is a SHA-256; the zero value means "absent".
type Hash [32]byte

// Hex is the lowercase hex of h, "" for the zero hash.
func (h Hash) Hex() string {
	if h == (Hash{}) {
		return ""
	}
	return hex.EncodeToString(h[:])
}

// ParseHash reads a lowercase hex SHA-256 ("" is the zero hash).
func ParseHash(s string) (Hash, bool) {
	var h Hash
	if s == "" {
		return h, true
	}
	if len(s) != 64 {
		return h, false
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, false
	}
	return h, true
}

// segRef names a segment in the head.
type segRef struct {
	from, to int64
	size     int64
	sum      Hash // SHA-256 of the segment's block table and footer
}

func (s segRef) name() string { return fmt.Sprintf("seg-%016x-%016x", s.from, s.to) }

// head is what the signed head says.
type head struct {
	origin string
	size   int64 // tree size of the checkpoint the index was computed at
	root   Hash
	state  struct {
		size int64
		sum  Hash
	}
	segs []segRef // cover [0, size) in order
}

func stateName(n int64) string { return fmt.Sprintf("state-%016x", n) }

// encode is the head's note body.
func (h *head) encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\n%d\n%s\n", headMagic, h.origin, h.size, base64.StdEncoding.EncodeToString(h.root[:]))
	fmt.Fprintf(&b, "state %d %x\n", h.state.size, h.state.sum)
	for _, s := range h.segs {
		fmt.Fprintf(&b, "seg %d %d %d %x\n", s.from, s.to, s.size, s.sum)
	}
	return []byte(b.String())
}

// parseHead reads a head body strictly: every line as encode writes it,
// segments covering [0, size) in order.
func parseHead(body []byte) (*head, error) {
	text := string(body)
	if !strings.HasSuffix(text, "\n") {
		return nil, formatErr("head: does not end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 5 || lines[0] != headMagic {
		return nil, formatErr("head: not an %q body", headMagic)
	}
	h := &head{origin: lines[1]}
	if h.origin == "" || strings.ContainsAny(h.origin, " \t") {
		return nil, formatErr("head: bad origin")
	}
	n, err := parseCount(lines[2])
	if err != nil {
		return nil, formatErr("head: size: %v", err)
	}
	h.size = n
	root, err := base64.StdEncoding.Strict().DecodeString(lines[3])
	if err != nil || len(root) != 32 || base64.StdEncoding.EncodeToString(root) != lines[3] {
		return nil, formatErr("head: bad root hash")
	}
	copy(h.root[:], root)
	f := strings.Split(lines[4], " ")
	if len(f) != 3 || f[0] != "state" {
		return nil, formatErr("head: bad state line")
	}
	if h.state.size, err = parseCount(f[1]); err != nil {
		return nil, formatErr("head: state size: %v", err)
	}
	if h.state.sum, err = parseSum(f[2]); err != nil {
		return nil, formatErr("head: state hash: %v", err)
	}
	at := int64(0)
	for _, l := range lines[5:] {
		f := strings.Split(l, " ")
		if len(f) != 5 || f[0] != "seg" {
			return nil, formatErr("head: bad line %q", l)
		}
		var s segRef
		if s.from, err = parseCount(f[1]); err == nil {
			if s.to, err = parseCount(f[2]); err == nil {
				if s.size, err = parseCount(f[3]); err == nil {
					s.sum, err = parseSum(f[4])
				}
			}
		}
		if err != nil {
			return nil, formatErr("head: segment: %v", err)
		}
		if s.from != at || s.to <= s.from {
			return nil, formatErr("head: segment [%d, %d) does not follow %d", s.from, s.to, at)
		}
		at = s.to
		h.segs = append(h.segs, s)
	}
	if at != h.size {
		return nil, formatErr("head: segments cover %d records, the head says %d", at, h.size)
	}
	return h, nil
}

func parseCount(s string) (int64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a decimal count", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a decimal count", s)
	}
	return n, nil
}

func parseSum(s string) (Hash, error) {
	var h Hash
	if len(s) != 64 || strings.ToLower(s) != s {
		return h, fmt.Errorf("%q is not a lowercase hex SHA-256", s)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%q is not a lowercase hex SHA-256", s)
	}
	return h, nil
}

func sum(b []byte) Hash { return sha256.Sum256(b) }

// enc appends big-endian integers and length-prefixed strings.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) i64(v int64)  { e.u64(uint64(v)) }
func (e *enc) uv(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) str(s string) { e.uv(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) hash(h Hash)  { e.b = append(e.b, h[:]...) }

// dec reads what enc wrote; the first error sticks and every later read
// returns zero values.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = formatErr("%s: truncated or out of range", what)
	}
}

func (d *dec) take(n int, what string) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail(what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8(what string) uint8 {
	if v := d.take(1, what); v != nil {
		return v[0]
	}
	return 0
}

func (d *dec) u32(what string) uint32 {
	if v := d.take(4, what); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *dec) u64(what string) uint64 {
	if v := d.take(8, what); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *dec) i64(what string) int64 { return int64(d.u64(what)) }

func (d *dec) uv(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items each at least min bytes long, refusing one
// the remaining bytes cannot hold (a hostile count never allocates).
func (d *dec) count(min int, what string) int {
	n := d.uv(what)
	if d.err == nil && (min > 0 && n > uint64(len(d.b)/min) || n > 1<<31) {
		d.fail(what)
		return 0
	}
	return int(n)
}

func (d *dec) str(what string) string {
	n := d.uv(what)
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail(what)
		return ""
	}
	return string(d.take(int(n), what))
}

func (d *dec) hash(what string) Hash {
	var h Hash
	copy(h[:], d.take(32, what))
	return h
}
