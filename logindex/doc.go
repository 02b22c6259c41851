// Package logindex keeps what the evidence log says, as of a signed
// checkpoint, beside the log: the versions of every guarded file, the
// records of every path and session, the provenance links, the sessions
// ever registered, what waits in quarantine, the mounts and snapshots. A
// mount reads it and the records appended since (the tail) instead of the
// whole log, and the read-only commands (history, log --path/--session,
// diff, restore, pending, gc, scope) look up what they need instead of
// parsing every record. The format is specified in docs/evidence-format.md
// (§11).
//
// It is kept in the state directory's evidence/ix/: immutable segments,
// each the index of a contiguous range of records (merged in the
// background so that a log of N records has O(log N) of them), one state
// file (the fold of every record so far: current guarded state, last
// versions, pending quarantines, mounts, snapshots, sessions), and a head
// that names them, bound to the checkpoint they were computed at by its
// tree size and root hash and signed with the log's key.
//
// # Invariants
//
//   - The log is the truth; the index is derived from it and never trusted
//     over it. Opening checks the head's signature, that its tree is a
//     prefix of the log's signed checkpoint (a consistency proof from the
//     log's stored hashes), and the hash of every byte it reads. Anything
//     that does not check out — a missing, stale, damaged or tampered
//     index — is set aside and the index is rebuilt from the log, and the
//     caller is told why (Index.Rebuilt).
//   - An index over records [0, N) and the tail [N, M) folded into it
//     answer exactly as the fold of [0, M) from scratch: one function
//     (Index.Add) folds a record in, whoever calls it, in log order.
//   - Only the log's writer (the daemon, which holds the log's lock)
//     writes the index; readers never change it.
//   - The writer's memory is bounded by what is live (the tail since the
//     last checkpoint, the sessions not ended, the guarded paths), not by
//     the log's length: segments and the sessions table are read on
//     demand.
//
// # Threat
//
// A reader that trusted a stale or altered index would show the owner a
// history that is not the log's, and restore the wrong version. So the
// index is bound to a checkpoint the log's key signed and verified against
// the log at every open, and its content against hashes the head carries.
// Content blobs are not its business: they stay in the blob store.
package logindex
