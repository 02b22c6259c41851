package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// # The workspace's evidence log is pinned
//
// A root daemon's state directory is root's, but the directory it lives in
// is usually the owner's (~/.local/state/aerfs/): an owner process — or a
// session started with --sandbox=off — can rename the state directory away
// and put its own in its place, with a permissive policy and an empty log,
// for the next mount to adopt. So the first root mount of a workspace pins
// the public key of its evidence log in a root-owned directory (PinDir),
// and every later root mount of that workspace refuses a state directory
// whose log has another key. A state directory moved whole keeps its key
// and is accepted wherever it is; starting a new log for a workspace is
// the owner's explicit act (`sudo aerfs mount --new-state`, or `sudo aerfs
// init` again), recorded in the new log.

// PinDir holds one pin per workspace a root daemon has served.
var PinDir = "/var/lib/aerfs/pins"

// Pin is what PinDir holds for a workspace.
type Pin struct {
	Workspace string `json:"workspace"`
	StateDir  string `json:"state_dir"` // where the log was when pinned
	PublicKey string `json:"public_key"`
	Pinned    string `json:"pinned"`
}

// pinPath is the pin file of workspace ws.
func pinPath(ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return filepath.Join(PinDir, hex.EncodeToString(sum[:8])+".json")
}

// ReadPin returns the pin of workspace ws, nil when it has none.
func ReadPin(ws string) (*Pin, error) {
	b, err := os.ReadFile(pinPath(ws))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var p Pin
	if err := json.Unmarshal(b, &p); err != nil || p.PublicKey == "" {
		if err == nil {
			err = errors.New("no public key in it")
		}
		return nil, fmt.Errorf("the pin of %s (%s) is unreadable: %v; a mount that starts a new log replaces it: sudo aerfs mount --new-state --state DIR %s",
			ws, pinPath(ws), err, ws)
	}
	return &p, nil
}

// ErrStateReplaced says that a workspace's state directory holds another
// evidence log than the one its pin names.
var ErrStateReplaced = errors.New("the state directory holds another evidence log than this workspace's")

// checkPin refuses a state directory whose evidence log is not the one
// workspace ws was pinned to. A workspace without a pin, or a state
// directory without a key yet (a fresh init), passes: the pin is written
// once the log is open (writePin).
func checkPin(ws, stateDir string) error {
	p, err := ReadPin(ws)
	if err != nil || p == nil {
		return err
	}
	// The first root mount made the state directory root's
	// (claimStateDir): one the owner made since is not it, whatever it
	// holds (a copy of the policy, a link to the genuine evidence).
	var st syscall.Stat_t
	if err := syscall.Lstat(stateDir, &st); err != nil {
		return err
	}
	if st.Uid != 0 {
		return fmt.Errorf("%w: %s is not root's, and %s was pinned at its first root mount to the state directory root took over then (%s, pinned %s); "+
			"the state directory may have been replaced. If the old state directory was moved, mount with --state at its new place; "+
			"to start a new log for this workspace on purpose: sudo aerfs mount --new-state --state %s %s",
			ErrStateReplaced, stateDir, ws, p.StateDir, p.Pinned, stateDir, ws)
	}
	// The signing key must belong to the public key: a copy of the
	// pinned public key (aerfs key prints it) does not make a log.
	key, kerr := evidence.KeyPair(stateDir)
	if kerr == nil && key == p.PublicKey {
		return nil
	}
	have := "no usable evidence key (" + errText(kerr) + ")"
	if kerr == nil {
		have = "key " + keyShort(key)
	}
	return fmt.Errorf("%w: %s has %s, and %s was pinned at its first mount to the log with key %s (in %s, pinned %s); "+
		"the state directory may have been replaced. If the old state directory was moved, mount with --state at its new place; "+
		"to start a new log for this workspace on purpose: sudo aerfs mount --new-state --state %s %s",
		ErrStateReplaced, stateDir, have, ws, keyShort(p.PublicKey), p.StateDir, p.Pinned, stateDir, ws)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// keyShort is a public key's name and hash prefix, as a user compares it.
func keyShort(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:6])
}

// writePin pins workspace ws to the evidence log in stateDir (replacing a
// pin only when replace is set) and returns the pin it replaced.
func writePin(ws, stateDir string, replace bool) (*Pin, error) {
	old, err := ReadPin(ws)
	if err != nil && !replace {
		return nil, err
	}
	key, err := evidence.PublicKey(stateDir)
	if err != nil {
		return nil, err
	}
	if old != nil && old.PublicKey == key && old.StateDir == stateDir {
		return nil, nil
	}
	if old != nil && old.PublicKey != key && !replace {
		return nil, ErrStateReplaced
	}
	if err := os.MkdirAll(PinDir, 0o700); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(PinDir); err != nil || !fi.IsDir() || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		return nil, fmt.Errorf("%s is not a root-owned directory", PinDir)
	}
	b, _ := json.MarshalIndent(Pin{Workspace: ws, StateDir: stateDir, PublicKey: key, Pinned: time.Now().UTC().Format(time.RFC3339)}, "", "  ")
	tmp := pinPath(ws) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, pinPath(ws)); err != nil {
		return nil, err
	}
	if old != nil && old.PublicKey == key {
		return nil, nil // moved: same log
	}
	return old, nil
}

// ForgetPin removes the pin of workspace ws (a root `aerfs init` starts a
// new log for it on purpose).
func ForgetPin(ws string) error {
	err := os.Remove(pinPath(ws))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
