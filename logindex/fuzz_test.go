package logindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/evidence"
)

// The index's parsers meet bytes that may be anything (a damaged disk, a
// file written by someone else): none of them may panic or allocate what
// the input merely claims, and what parses must hold together. Seeds:
// the golden index's head and state file (testdata/fuzz), a small segment
// made here (the golden segments are too big for the mutator).

func FuzzParseHead(f *testing.F) {
	f.Add([]byte("aerfs-index 1\no\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\nstate 40 " + string(bytes.Repeat([]byte("a"), 64)) + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// A signed head is the note body before the signature.
		if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
			b = b[:i+1]
		}
		h, err := parseHead(b)
		if err != nil {
			return
		}
		h2, err := parseHead(h.encode())
		if err != nil || h2.size != h.size || h2.root != h.root || len(h2.segs) != len(h.segs) || !bytes.Equal(h2.encode(), h.encode()) {
			t.Fatalf("a parsed head does not survive encode/parse: %v", err)
		}
	})
}

// FuzzSegment reads the input as a segment whose head entry matches it
// (so the block table check passes and the parser itself is exercised),
// then walks everything it holds.
func FuzzSegment(f *testing.F) {
	// A small segment: the golden ones are too big for the mutator.
	m := newMem(5)
	fd := newFold()
	for i, r := range []*evidence.Record{
		{Type: evidence.TypeWrite, Principal: "USER", Meta: evidence.Meta{Path: "MEMORY.md", Session: "s", Time: "2026-03-01T12:00:00Z"},
			Payload: &evidence.Payload{NewHash: strings.Repeat("a", 64)}},
		{Type: evidence.TypeReads, Principal: "WEB", Parents: []string{}, Meta: evidence.Meta{Session: "s", Time: "2026-03-01T12:00:01Z"},
			Payload: &evidence.Payload{Reads: []evidence.FileRead{{Path: "n.md", Hash: strings.Repeat("b", 64)}}}},
		{Type: evidence.TypeDelete, Principal: "USER", Meta: evidence.Meta{Path: "MEMORY.md", Time: "2026-03-01T12:00:02Z"},
			Payload: &evidence.Payload{OldHash: strings.Repeat("a", 64)}},
	} {
		idx := int64(5 + i)
		m.add(idx, Hash{byte(i)}, r, []int64{idx - 1}, fd.add(idx, Hash{byte(i)}, r))
	}
	seed, _, _ := encodeSegment(m)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < segHeader+footerSize {
			return
		}
		ref := segRef{size: int64(len(b))}
		ref.from = int64(binary.BigEndian.Uint64(b[8:16]))
		ref.to = int64(binary.BigEndian.Uint64(b[16:24]))
		body := int64(binary.BigEndian.Uint64(b[len(b)-footerSize:]))
		if body < 0 || body > int64(len(b)) {
			return
		}
		ref.sum = sha256.Sum256(b[body:])
		seg, err := readSegment(bytes.NewReader(b), nil, ref)
		if err != nil {
			return
		}
		if seg.to-seg.from > 1<<16 {
			return // a header may claim any range; walking it is not the point
		}
		m, err := seg.toMem()
		if err != nil {
			return
		}
		for i := seg.from; i < seg.to; i++ {
			seg.children(i)
		}
		for p := range m.hist {
			seg.versions(p)
			seg.keysUnder(kVersion, p)
		}
		seg.postings("zzz")
	})
}

func FuzzState(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		fd := newFold()
		if err := loadState(bytes.NewReader(b), int64(len(b)), sum(b), fd); err != nil {
			return
		}
		n := 0
		fd.base.each(func(s *Session) error {
			n++
			fd.base.lookup(s.ID)
			for _, c := range s.Cgroups {
				fd.base.byCgroup(c)
			}
			return nil
		})
		if n != fd.base.count() {
			t.Fatalf("%d sessions listed, %d counted", n, fd.base.count())
		}
		// What parses encodes back to the same bytes.
		out, err := encodeState(fd, fd.base.each)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("a parsed state file does not encode back to itself (%v)", err)
		}
	})
}
