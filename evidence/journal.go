package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// # The journal
//
// A guarded commit waits for exactly one flush: its records and the
// content they name are written together as one frame of evidence/journal
// and that one file is flushed (fdatasync, within space allocated
// beforehand, so that the file's size never changes with a frame). The log, its index and
// stored hashes and the blob files are written at the same time but
// flushed later, off the appenders' path, before the checkpoint that
// covers them is signed; after that checkpoint is durable the journal
// starts again at its beginning. A crash loses none of what was
// acknowledged: Open rebuilds the log past the signed checkpoint from the
// journal's frames and writes their blobs (replayJournal), and only then
// recovers as before.
//
// A frame is a 64-byte header and a payload:
//
//	magic "aerfs-j1" | first record index (uint64) | records (uint32) |
//	blobs (uint32) | payload length (uint64) | SHA-256 of the payload
//	payload: per blob: its hash (32 raw bytes), length (uint64), the blob
//	file's bytes (raw or zstd, as in blobs/); then per record: length
//	(uint32), its canonical JSON
//
// all integers big-endian. Frames follow one another from offset 0, each
// starting where the previous one's records end; the first header that is
// not whole, not matching its payload or not continuing the sequence ends
// the journal (what follows is an older generation or nothing).

const (
	journalName   = "journal"
	journalMagic  = "aerfs-j1"
	journalHeader = 64
	// journalBlobMax: content up to this size travels in the journal;
	// larger content is written as a blob file flushed with the batch.
	journalBlobMax = 1 << 20
	// journalAlloc: the journal's space is allocated in steps of this
	// size, so that a frame's flush never carries a size change.
	journalAlloc = 4 << 20
)

// memBlob is content stored through the journal: in memory until it is
// written as a blob file after the frame carrying it is durable.
type memBlob struct {
	body      []byte // the blob file's bytes (raw or zstd)
	journaled bool   // in a durable frame
}

type journalFrame struct {
	first   int64
	records [][]byte // canonical JSON, without the newline
	blobs   map[string][]byte
	size    int64
}

// encodeFrame builds one frame.
func encodeFrame(first int64, records [][]byte, blobs map[string][]byte) []byte {
	var p bytes.Buffer
	var b8 [8]byte
	var b4 [4]byte
	for h, body := range blobs {
		raw, _ := hex.DecodeString(h)
		p.Write(raw)
		binary.BigEndian.PutUint64(b8[:], uint64(len(body)))
		p.Write(b8[:])
		p.Write(body)
	}
	for _, r := range records {
		binary.BigEndian.PutUint32(b4[:], uint32(len(r)))
		p.Write(b4[:])
		p.Write(r)
	}
	payload := p.Bytes()
	h := make([]byte, journalHeader, journalHeader+len(payload))
	copy(h, journalMagic)
	binary.BigEndian.PutUint64(h[8:], uint64(first))
	binary.BigEndian.PutUint32(h[16:], uint32(len(records)))
	binary.BigEndian.PutUint32(h[20:], uint32(len(blobs)))
	binary.BigEndian.PutUint64(h[24:], uint64(len(payload)))
	sum := sha256.Sum256(payload)
	copy(h[32:], sum[:])
	return append(h, payload...)
}

// readJournal returns the journal's frames, in order.
func readJournal(f *os.File) ([]journalFrame, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	var frames []journalFrame
	var off int64
	next := int64(-1)
	hdr := make([]byte, journalHeader)
	for off+journalHeader <= size {
		if _, err := f.ReadAt(hdr, off); err != nil {
			return nil, err
		}
		if string(hdr[:8]) != journalMagic {
			break
		}
		first := int64(binary.BigEndian.Uint64(hdr[8:]))
		nrec := int(binary.BigEndian.Uint32(hdr[16:]))
		nblob := int(binary.BigEndian.Uint32(hdr[20:]))
		plen := int64(binary.BigEndian.Uint64(hdr[24:]))
		if first < 0 || (next >= 0 && first != next) || plen < 0 || plen > size-off-journalHeader {
			break
		}
		payload := make([]byte, plen)
		if _, err := f.ReadAt(payload, off+journalHeader); err != nil {
			return nil, err
		}
		if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], hdr[32:]) {
			break
		}
		fr, ok := decodePayload(payload, nrec, nblob)
		if !ok {
			break
		}
		fr.first, fr.size = first, journalHeader+plen
		frames = append(frames, fr)
		off += fr.size
		next = first + int64(nrec)
	}
	return frames, nil
}

func decodePayload(p []byte, nrec, nblob int) (journalFrame, bool) {
	fr := journalFrame{blobs: map[string][]byte{}}
	for i := 0; i < nblob; i++ {
		if len(p) < 40 {
			return fr, false
		}
		h := hex.EncodeToString(p[:32])
		n := binary.BigEndian.Uint64(p[32:40])
		p = p[40:]
		if n > uint64(len(p)) {
			return fr, false
		}
		fr.blobs[h] = p[:n]
		p = p[n:]
	}
	for i := 0; i < nrec; i++ {
		if len(p) < 4 {
			return fr, false
		}
		n := binary.BigEndian.Uint32(p[:4])
		p = p[4:]
		if uint64(n) > uint64(len(p)) || n > MaxRecordSize {
			return fr, false
		}
		fr.records = append(fr.records, p[:n])
		p = p[n:]
	}
	return fr, len(p) == 0
}

// openJournal opens (creating it when missing) the journal and replays
// it: the log past the signed checkpoint becomes what the journal's frames
// say was acknowledged, and their blobs are stored. A state directory from
// before the journal has none: its log is recovered as it is, and the
// journal starts empty. It returns how many records came from the journal
// that the log file did not hold whole.
func (l *Log) openJournal(cp Checkpoint) (int, error) {
	p := filepath.Join(l.dir, journalName)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		if f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			err = syncDir(l.dir)
		}
		if err != nil {
			return 0, fmt.Errorf("evidence: journal: %w", err)
		}
		l.jf = f
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("evidence: journal: %w", err)
	}
	l.jf = f
	frames, err := readJournal(f)
	if err != nil {
		return 0, fmt.Errorf("evidence: journal: %w", err)
	}
	// The blobs first: a record is kept only if its blobs are stored.
	for _, fr := range frames {
		for h, body := range fr.blobs {
			if _, err := readBlob(l.dir, h); err == nil {
				continue
			}
			if _, err := decodeBlob(h, body); err != nil {
				continue // not the content its hash names: never written
			}
			if err := l.writeBlobBody(h, body); err != nil {
				return 0, fmt.Errorf("evidence: journal: blob %s: %w", h, err)
			}
		}
	}
	if err := l.syncBlobDirs(true); err != nil {
		return 0, fmt.Errorf("evidence: journal: %w", err)
	}
	// Where the checkpoint's records end in the log.
	var cpEnd int64
	if cp.Size > 0 {
		_, end, _, err := readEntry(l.idxf, cp.Size-1)
		if err != nil {
			return 0, nil // damage below the checkpoint: recover refuses it and says what
		}
		cpEnd = end
	}
	var tail []byte
	for _, fr := range frames {
		for i, r := range fr.records {
			if fr.first+int64(i) >= cp.Size {
				tail = append(append(tail, r...), '\n')
			}
		}
	}
	if len(frames) > 0 && frames[0].first > cp.Size {
		// Frames start where a durable checkpoint ended (Open and every
		// checkpoint sign, flush and only then start the journal again),
		// so this checkpoint is damaged or replaced: leave the log as it
		// is to recover (and verify) say what is wrong.
		return 0, nil
	}
	fi, err := l.logf.Stat()
	if err != nil {
		return 0, err
	}
	if len(tail) == 0 || fi.Size() < cpEnd {
		// Nothing acknowledged past the checkpoint, or a log shorter than
		// its checkpoint (damage: recover refuses it).
		return 0, nil
	}
	have := make([]byte, min(fi.Size()-cpEnd, int64(len(tail))))
	if len(have) > 0 {
		if _, err := l.logf.ReadAt(have, cpEnd); err != nil && err != io.EOF {
			return 0, err
		}
	}
	if bytes.Equal(have, tail) {
		// The log holds every acknowledged record whole; whatever follows
		// them was never acknowledged, and recover cuts what is torn.
		return 0, nil
	}
	// The log lost (part of) what was acknowledged: the journal's
	// records replace its tail from the first line that differs.
	keep := 0
	for keep < len(have) && have[keep] == tail[keep] {
		keep++
	}
	keep = bytes.LastIndexByte(tail[:keep], '\n') + 1
	if err := l.logf.Truncate(cpEnd + int64(keep)); err != nil {
		return 0, fmt.Errorf("evidence: journal: %w", err)
	}
	if _, err := l.logf.WriteAt(tail[keep:], cpEnd+int64(keep)); err != nil {
		return 0, fmt.Errorf("evidence: journal: %w", err)
	}
	if err := syncFile(l.logf); err != nil {
		return 0, fmt.Errorf("evidence: journal: %w", err)
	}
	return bytes.Count(tail[keep:], []byte{'\n'}), nil
}

// writeFrame makes one frame durable at the journal's current end.
func (l *Log) writeFrame(frame []byte) error {
	if end := l.jpos + int64(len(frame)); end > l.jalloc {
		// Allocate ahead when the disk has room (a frame's flush then
		// carries no size change); without it the frame is simply written.
		alloc := (end/journalAlloc + 1) * journalAlloc
		if unix.Fallocate(int(l.jf.Fd()), 0, 0, alloc) == nil {
			l.jalloc = alloc
		}
	}
	if _, err := l.jf.WriteAt(frame, l.jpos); err != nil {
		return err
	}
	return fdatasync(l.jf)
}

// fdatasync is the journal's flush; a test may swap it.
var fdatasync = func(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// cutJournal makes sure no frame at or past the journal's current end
// survives: a batch whose frame was written but not acknowledged.
func (l *Log) cutJournal() error {
	var zero [journalHeader]byte
	if _, err := l.jf.WriteAt(zero[:], l.jpos); err != nil {
		return err
	}
	return fdatasync(l.jf)
}
