// Package txn is the one transaction: the only code that changes guarded
// content. Every change of a guarded path — a commit or a truncate, an
// unlink, a rename to, from or over a guarded name, a link onto one, a
// promotion, and the daemon's restores, approvals, rollbacks, drift
// repairs and completed writes — is carried out by Apply, in one order:
//
//	decided (through the gate, by the caller) and labelled (by the flow)
//	→ the previous version of every path kept as a blob
//	→ the new content stored (Prepare)
//	→ the records made durable, all of them in one batch or none
//	→ published (the rename, unlink or link in the backing directory)
//	→ labels and indexes updated (Done)
//
// under the locks of every path it changes.
//
// # Invariants
//
//   - A change whose records cannot be made durable does not happen: EIO,
//     nothing published.
//   - A change whose records are durable but whose publication fails is
//     recorded as not applied (a restore record back to the kept
//     versions); one a crash interrupts between the two is completed at
//     the next mount from the log. So no guarded file ever holds content
//     the log has not recorded, and nothing the log recorded is lost.
//   - Staged content never reaches a guarded file before its commit is
//     decided: a Draft lives in memory (or in the state directory), never
//     next to the file it will replace.
//   - Refused content is never lost: Quarantine keeps it as a blob.
package txn
