// Package recovery changes guarded files from the owner's channel, never
// from a FUSE request: restores, approvals, the burst rollback, drift
// repair, changes completed at mount, the owner's edits and adoptions.
// Each goes through the one transaction (guard/txn) under the same
// per-path lock as a commit, keeps the previous version, and gets its
// label from the one label flow (guard/flow).
//
// # Invariants
//
//   - A change is idempotent: a file that already holds what it should is
//     left alone, with no record.
//   - A change is made only against the version it was planned on (an
//     edit's base): one made meanwhile by someone else is not undone.
//   - Drift — content that is not what aerfs last gave a file — is
//     reported once, and its label becomes EXTERNAL, so whoever reads it
//     is tainted UNTRUSTED until the owner adopts it.
package recovery
