// Package fs is the FUSE side of aerfs: go-fuse's loopback over the
// backing directory, in which every node and handle turns one request into
// one call of the guard's Door (package guard) and the *at system call the
// guard lets happen.
//
// # Invariants
//
//   - No operation reaches the backing directory around the Door: every
//     node interface go-fuse's loopback implements is overridden here or
//     listed, with its reason, as unable to change or reveal anything
//     (TestGateIsTheOnlyDoor).
//   - Guarded files are never served with kernel passthrough or cached
//     attributes or entries: a handle that writes one stages every byte
//     (direct I/O), a reader's pages live from its open to its close.
//   - Session namespaces are never served from the kernel's dentry cache:
//     an entry looked up by one session must not be reused by another.
//
// # Threat
//
// An agent (or anything it runs) that was steered by content it read tries
// to rewrite its own long-term memory or configuration, by any file
// operation it can find: write, truncate, rename over, link, symlink,
// xattr, chmod, mmap, copy_file_range.
package fs
