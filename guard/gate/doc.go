// Package gate turns a caller into a subject and a subject into a verdict:
// it is the only code of the guard that calls the policy's decision
// functions (TestOnlyTheGateDecides) and the authority's act gate, and it
// records every verdict that is not a plain allow.
//
// # Invariants
//
//   - A caller is resolved from the request's thread id by the principal
//     registry, never from anything the process says; a caller that
//     cannot be identified is refused every guarded change (R9).
//   - A target is classified by its path at the moment of the operation
//     and by its inode (a hard link to a guarded file is guarded), and
//     carries the label of its current content; a label whose binding
//     broke reads as EXTERNAL.
//   - A refusal is recorded with its rule and counted against the root of
//     the caller's session tree; a burst of them quarantines the tree.
//   - What a read brings is not applied here: the gate says it (the
//     verdict's AddTaint), the label flow applies it.
//
// # Threat
//
// An agent steered by content it read tries to change its memory or
// configuration by any operation it can find, or to make content of
// untrusted origin act (run, become configuration, be promoted).
package gate
