// Package label holds what aerfs knows of a file's content — who wrote
// it, what that writer had seen, the authority class bound to it — and
// keeps it, by inode, in a journal that survives crashes and remounts.
//
// # Invariants
//
//   - A label is computed in one place, the label flow (guard/flow); this
//     package only stores, binds and reads labels. No other package
//     builds a Label (TestLabelsFlowInOnePlace).
//   - A label follows the inode: a rename keeps it, a hard link shares it.
//   - A label is bound to its content: by content hash for guarded files,
//     by a cheap fingerprint (size, mtime, ctime) for every file. A label
//     whose binding broke is read as EXTERNAL and UNTRUSTED (Broken).
//   - A label that carries taint, or removes one that did, is flushed to
//     the journal before the change it describes is acted on.
package label
