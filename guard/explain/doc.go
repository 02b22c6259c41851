// Package explain says, from the evidence log, what the guard knows about
// a process, a session or a path: its principal and taint and where the
// taint came from, its last refusals with rule and reason and where the
// refused content went, what it cannot do now and why. It is what
// .aerfs/status tells every caller about itself and what `aerfs why` tells
// the owner.
//
// # Invariants
//
//   - It reads the log (incrementally: each question takes what was
//     appended since the last one); the FUSE paths never pay for it.
//     Given the log's index (Source), it follows the log from the mount
//     on only, and reads what came before from the index when asked:
//     its memory follows the live sessions and processes, not the log's
//     length.
//   - It decides nothing: what a subject cannot do is said in words from
//     the policy's rules, never by asking the policy.
package explain
