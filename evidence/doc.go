// Package evidence is aerfs's tamper-evident evidence log: records,
// canonical JSON, a Merkle log with signed checkpoints, content-addressed
// blobs, export bundles and offline verification. It knows nothing of
// FUSE or of the rest of aerfs. The byte-level format is specified in
// docs/evidence-format.md; this comment states the invariants.
//
// # Invariants
//
//   - A record's bytes are its RFC 8785 canonical JSON and nothing else;
//     its id is SHA-256 of those bytes. ParseRecord accepts only
//     canonical input, so one record has exactly one encoding and one id.
//   - The log is append-only. Record i is leaf i of an RFC 6962 Merkle
//     tree whose leaf data is the record's 32-byte id.
//   - Append returns only after the record's line, index entry and stored
//     hashes are fsynced and a checkpoint signing the new tree is in place.
//     Concurrent appends share one batch (group commit).
//   - Everything a signed checkpoint covers was acknowledged. Open cuts a
//     torn tail only past the checkpoint, and records the cut; anything
//     missing below it is damage that Open refuses and Verify reports.
//   - Parents of a record are earlier records (Append enforces it), so the
//     provenance graph is acyclic and walks backwards in the log.
//
// # Threats answered
//
// Editing, inserting, deleting, duplicating or reordering records changes
// ids or the Merkle root; the root is signed (Ed25519 note) so it cannot
// be recomputed without the key; blobs are checked against their names
// and references. A checkpoint held by a witness plus a consistency proof
// detects a rewritten history, which the signature alone cannot (the
// key holder could re-sign). Bundles are parsed strictly (unknown fields,
// duplicate keys, null, non-canonical records rejected) and zips are read
// in memory under count and size limits, refusing traversal, absolute
// paths, symlinks, duplicates and non-UTF-8 names; nothing is extracted.
//
// # Not answered
//
// Whoever holds the private key can forge a whole consistent log; a
// deleted state directory leaves nothing to verify. External witnesses
// of checkpoints are the mitigation for both.
package evidence
