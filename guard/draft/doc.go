// Package draft holds what a handle on a guarded file has written and not
// yet committed: the staged content, kept in memory (a memfd) or, past
// 16 MiB, in the state directory — never next to the file it will
// replace — and every process that wrote it.
//
// # Invariants
//
//   - Staged content reaches no reader: a read of the draft serves its
//     writer only, and a commit publishes it (guard/txn) only once decided.
//   - Every process that wrote through the handle is remembered with the
//     resolutions seen while it wrote (tracking.WriterSet): the commit is
//     decided for each of them as it is then, and as it was.
//   - A handle whose changes are all appends is rebased at commit onto the
//     file's content of that moment, so that concurrent appenders all land.
package draft
