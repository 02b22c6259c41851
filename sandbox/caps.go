package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Securebits locked in a session (linux/securebits.h): uid 0 gains no
// capability at execve (NOROOT), changing uids does not give any back
// (NO_SETUID_FIXUP), keep-caps cannot be turned on, ambient capabilities
// cannot be raised; each with its lock, so the session cannot undo it.
const (
	secbitNoroot                  = 1 << 0
	secbitNorootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7

	sessionSecurebits = secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
)

// dropCapabilities empties the calling thread's capability sets: the
// bounding set and the securebits first (both need CAP_SETPCAP, which a
// session's namespace copy of aerfs run keeps for this), then ambient,
// inheritable, permitted and effective. A root owner's session is then uid
// 0 without any capability, in its user namespace or not; execve cannot
// give any back. Without CAP_SETPCAP (an unprivileged owner without a
// namespace) the bounding set stays as it was: the session's other sets
// are empty anyway, and no_new_privs keeps set-uid and file capabilities
// from raising them. It returns what could not be done, for the report.
func dropCapabilities() (warning string, err error) {
	if haveCap(unix.CAP_SETPCAP) {
		for c := 0; c <= lastCap(); c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
				return "", fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, sessionSecurebits, 0, 0, 0); err != nil {
			return "", fmt.Errorf("lock the securebits: %w", err)
		}
	} else if !boundingEmpty() {
		warning = "the capability bounding set is kept (no CAP_SETPCAP to empty it); the other sets are empty and no_new_privs holds"
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return "", fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return "", fmt.Errorf("empty the capability sets: %w", err)
	}
	return warning, nil
}

// boundingEmpty reports whether the calling thread's bounding set is
// empty already (a session started from within a session).
func boundingEmpty() bool {
	for c := 0; c <= lastCap(); c++ {
		if v, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && v == 1 {
			return false
		}
	}
	return true
}

// haveCap reports whether the calling thread has capability c effective.
func haveCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}

// lastCap is the highest capability this kernel knows.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63 // PR_CAPBSET_DROP answers EINVAL past the last one
}
