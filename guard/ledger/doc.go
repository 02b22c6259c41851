// Package ledger is how the guard speaks to the evidence log: records
// queued for the next group commit (verdicts, taint, reads) or made
// durable before the change they describe (every guarded change), the
// content kept as blobs, and the counts `aerfs status` shows.
//
// # Invariants
//
//   - A record of a guarded change is durable (Must, AppendAll) before the
//     change is published; a verdict is queued (Record) and never adds a
//     disk flush to the system call that caused it.
//   - Every record of a further root names its files "@root/…": the paths
//     a room hands in are relative to its root (Fill).
//   - A refusal's record names the rule that refused, and an unidentified
//     caller is recorded as EXTERNAL with the reason it could not be
//     identified (Verdict).
package ledger
