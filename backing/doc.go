// Package backing reaches the directory underneath a mount: every call is
// made relative to a descriptor of it opened before the mount covered it,
// with RESOLVE_BENEATH and no symlink followed anywhere on the way.
//
// # Invariants
//
//   - No path is rebuilt into an absolute one: a rel names a file below the
//     backing directory and is resolved with openat2(RESOLVE_BENEATH |
//     RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), so a symlink planted in
//     the workspace can never lead a call outside it or to another file.
//   - A path longer than one system call takes (PATH_MAX) is reached piece
//     by piece, each piece resolved beneath the one before.
//   - The package knows nothing of FUSE, policy or labels: it is the floor
//     the guard and the FUSE nodes stand on (as gocryptfs's syscallcompat).
//
// # Threat
//
// A process in the workspace swaps a directory for a symlink between the
// guard's decision and its system call, to make the daemon (root) read or
// replace a file outside the workspace.
package backing
