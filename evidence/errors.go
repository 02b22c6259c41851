package evidence

import (
	"errors"
	"fmt"
)

// Kind classifies why verification failed. The CLI maps each kind to its
// own exit code (docs/evidence-format.md, "Exit codes").
type Kind int

const (
	// KindIntegrity: content does not match what hashes, proofs or counts
	// commit to (an id, a blob, a root, a missing or extra item).
	KindIntegrity Kind = iota + 1
	// KindSchema: a file is not well-formed: bad JSON, unknown or missing
	// fields, wrong types, bad hex, bad times, non-canonical encoding.
	KindSchema
	// KindSignature: the checkpoint is not signed by the trusted key.
	KindSignature
	// KindIO: a file could not be read, or a container is unsafe to read
	// (hostile zip layout, limits exceeded).
	KindIO
)

func (k Kind) String() string {
	switch k {
	case KindIntegrity:
		return "integrity"
	case KindSchema:
		return "schema"
	case KindSignature:
		return "signature"
	case KindIO:
		return "io"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// VerifyError is the only error type VerifyBundle and VerifyState return.
// What names the failing item first ("record 17: id mismatch").
type VerifyError struct {
	Kind Kind
	What string
}

func (e *VerifyError) Error() string { return e.What }

func verr(k Kind, format string, args ...any) *VerifyError {
	return &VerifyError{Kind: k, What: fmt.Sprintf(format, args...)}
}

// prefix re-labels err with the item it concerns, keeping its kind; a
// plain error becomes KindIO because only I/O produces untyped errors here.
func prefix(what string, err error) *VerifyError {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return &VerifyError{Kind: ve.Kind, What: what + ": " + ve.What}
	}
	return &VerifyError{Kind: KindIO, What: what + ": " + err.Error()}
}

// KindOf returns the Kind of a *VerifyError in err's chain, or 0.
func KindOf(err error) Kind {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return ve.Kind
	}
	return 0
}
