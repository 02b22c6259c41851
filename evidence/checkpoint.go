package evidence

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is the signed statement "the log named Origin has Size
// records and Merkle root Root", in the C2SP tlog-checkpoint body format.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// RootHex is the root as lowercase hex, as manifests and proofs carry it.
func (c Checkpoint) RootHex() string { return hex.EncodeToString(c.Root[:]) }

// Body is the checkpoint text that gets signed: origin, decimal size,
// base64 root, each ending in a newline, and no extension lines.
func (c Checkpoint) Body() []byte {
	return []byte(fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:])))
}

// ParseCheckpointBody parses exactly what Body writes and nothing else.
func ParseCheckpointBody(text string) (Checkpoint, error) {
	var c Checkpoint
	lines := strings.Split(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return c, schemaErr("checkpoint: body must be exactly origin, size and root lines")
	}
	if lines[0] == "" {
		return c, schemaErr("checkpoint: empty origin")
	}
	c.Origin = lines[0]
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return c, schemaErr("checkpoint: bad tree size %q", lines[1])
	}
	c.Size = n
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return c, schemaErr("checkpoint: bad root hash %q", lines[2])
	}
	copy(c.Root[:], root)
	return c, nil
}

// signCheckpoint returns the signed note for c.
func signCheckpoint(c Checkpoint, s note.Signer) ([]byte, error) {
	return note.Sign(&note.Note{Text: string(c.Body())}, s)
}

// OpenCheckpoint verifies a signed checkpoint against the verifier key
// vkey and returns its contents. The key's name must be the origin.
func OpenCheckpoint(msg []byte, vkey string) (Checkpoint, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return Checkpoint{}, verr(KindSignature, "checkpoint: bad public key: %v", err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return Checkpoint{}, verr(KindSignature, "checkpoint: signature by unknown key (trusted key is %s+%08x)", v.Name(), v.KeyHash())
		case errors.As(err, &invalid):
			return Checkpoint{}, verr(KindSignature, "checkpoint: invalid signature by %s+%08x", invalid.Name, invalid.Hash)
		default:
			// The signature block could not be read: nothing vouches for the body.
			return Checkpoint{}, verr(KindSignature, "checkpoint: %v", err)
		}
	}
	if len(n.Sigs) != 1 || len(n.UnverifiedSigs) != 0 {
		return Checkpoint{}, verr(KindSignature, "checkpoint: want exactly one signature, by the trusted key")
	}
	c, err := ParseCheckpointBody(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, verr(KindSignature, "checkpoint: origin %q does not match key name %q", c.Origin, v.Name())
	}
	return c, nil
}

// peekCheckpoint reads a checkpoint's body without checking the signature,
// for readers that only need the committed size (never for verification).
func peekCheckpoint(msg []byte) (Checkpoint, error) {
	i := bytes.Index(msg, []byte("\n\n"))
	if i < 0 {
		return Checkpoint{}, schemaErr("checkpoint: malformed note")
	}
	return ParseCheckpointBody(string(msg[:i+1]))
}

// keyID is the note key hash of a verifier key, as 8 hex digits.
func keyID(vkey string) (string, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%08x", v.KeyHash()), nil
}
