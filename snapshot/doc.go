// Package snapshot answers recovery questions from the evidence log: which
// versions a guarded file had, what the guarded state was at a time or a
// snapshot, what a poisoned source contaminated, what is waiting in
// quarantine, and how to get from one state to another. It also keeps the
// restore journal that makes a multi-file restore survive a crash.
//
// It reads records and blobs through package evidence and knows nothing of
// FUSE, of the daemon or of how callers are identified: the daemon and the
// read-only commands share it.
//
// # Invariants
//
//   - The evidence log is the only source of truth. An Index is a pure
//     function of the records it was given, in log order; Load and a
//     sequence of Add calls over the same records build the same Index.
//   - An Index holds record ids, paths and content hashes, never content:
//     its memory grows with the number of records, not with file sizes.
//     Content is read from blobs only when asked for (diffs, sizes).
//   - A State maps a workspace-relative path to the SHA-256 of its content.
//     A path that is not in the map is absent. Plan never produces a step
//     that would leave a file as it is.
//   - Contamination is a walk over the provenance DAG the records already
//     name (Parents), plus the rule that a later version of a contaminated
//     file stays contaminated. Nothing outside the scope is touched by
//     StateBefore: an unrelated change made meanwhile survives the undo.
//
// # Threat
//
// A poisoned source (a web page, a skill, a message) leads an agent to
// change guarded files, some of them while the source was still trusted.
// The owner must be able to undo exactly that chain and nothing else, and a
// crash in the middle of that undo must not leave the workspace half way:
// the journal records the whole plan durably before the first file changes.
package snapshot
