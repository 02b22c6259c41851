package policy

import (
	"fmt"
	"io"
	"os"
)

// Load reads and parses the policy file at path. Errors name the file as
// path, so that "path:line" opens in an editor.
func Load(path string) (*Policy, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// ReadFile reads a policy file, checking before it reads that it is a
// regular file of at most maxPolicySize bytes: a 50 MB file is refused
// without being read, and a FIFO without being opened (an open would wait
// for a writer). The opened file is checked again to be the one stat saw.
func ReadFile(path string) ([]byte, error) {
	pre, err := os.Stat(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read policy: " + err.Error(), Hint: "check the path, or run aerfs init to write the default policy"}
	}
	if !pre.Mode().IsRegular() {
		return nil, &Error{File: path, Msg: "the policy is not a regular file", Hint: "name the policy file itself"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read policy: " + err.Error(), Hint: "check the path, or run aerfs init to write the default policy"}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read policy: " + err.Error()}
	}
	if !fi.Mode().IsRegular() || !os.SameFile(pre, fi) {
		return nil, &Error{File: path, Msg: "the policy file changed while it was opened", Hint: "try again"}
	}
	tooLarge := &Error{File: path, Msg: fmt.Sprintf("policy file is larger than %d bytes", maxPolicySize), Hint: "a policy is a page of YAML; check that the right file is named"}
	if fi.Size() > maxPolicySize {
		tooLarge.Msg = fmt.Sprintf("policy file is %d bytes, larger than the %d-byte limit", fi.Size(), maxPolicySize)
		return nil, tooLarge
	}
	// The file may grow after the stat: never read past the limit.
	data, err := io.ReadAll(io.LimitReader(f, maxPolicySize+1))
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read policy: " + err.Error()}
	}
	if len(data) > maxPolicySize {
		return nil, tooLarge
	}
	return data, nil
}
