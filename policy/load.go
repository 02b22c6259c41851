package policy

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFileSize is the largest policy file Load reads: a policy is a page of
// YAML.
const MaxFileSize = maxPolicySize

// Load reads and parses the policy file at path. Errors name the file as
// path, so that "path:line" opens in an editor.
func Load(path string) (*Policy, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// ReadFile reads the policy file at path without ever holding more than
// MaxFileSize+1 bytes of it: the size is checked before reading (stat,
// then fstat of what was opened), the read goes through a limit, and
// anything but a regular file is refused without waiting on it (a FIFO is
// opened non-blocking).
func ReadFile(path string) ([]byte, error) {
	readErr := func(err error) error {
		return &Error{File: path, Msg: "cannot read policy: " + err.Error(), Hint: "check the path, or run aerfs init to write the default policy"}
	}
	tooBig := func(size int64) error {
		return &Error{File: path, Msg: fmt.Sprintf("policy file is %d bytes, larger than %d", size, maxPolicySize), Hint: "a policy is a page of YAML; check that the right file is named"}
	}
	check := func(fi os.FileInfo) error {
		if !fi.Mode().IsRegular() {
			return &Error{File: path, Msg: fmt.Sprintf("policy file is not a regular file (%s)", fi.Mode().Type()), Hint: "name the policy YAML file itself"}
		}
		if fi.Size() > maxPolicySize {
			return tooBig(fi.Size())
		}
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, readErr(err)
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, readErr(err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, readErr(err)
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPolicySize+1))
	if err != nil {
		return nil, readErr(err)
	}
	if len(data) > maxPolicySize {
		return nil, tooBig(int64(len(data)))
	}
	return data, nil
}
