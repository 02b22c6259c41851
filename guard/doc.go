// Package guard is aerfs's reference monitor: the rooms that decide, label
// and carry out every operation on a guarded workspace, and the two doors
// into them.
//
// The FUSE nodes (package fs) enter through the Door: one call per
// request, which decides through the gate (guard/gate), lets labels flow
// (guard/flow) and changes guarded content through the one transaction
// (guard/txn), calling back the node's own *at system call where the
// change happens. The daemon enters through the Guard, a facade of twelve
// methods: policy, status, explanations, the owner's changes (restore,
// approve, edit, adopt, promote), drift and the act gate's tokens.
//
// # Rooms
//
//	gate      caller → subject → verdict; the act gate; the only caller of the policy's decisions
//	flow      the one label-flow function (Next)
//	draft     a guarded handle's staged content and writers
//	txn       stage → record → publish: the only writer of guarded content
//	tracking  readers, writers, objects, path locks, expected contents
//	recovery  restore, approve, rollback, drift, edit, adopt
//	explain   what the log says about a process, a session, a path
//	label     labels, their binding and their journal
//	ledger    records and blobs in the evidence log
//
// docs/architecture.md draws them and the path of a commit, a read, a
// rename and a restore through them.
//
// # Invariants
//
//   - Every FUSE operation family passes the gate (TestGateIsTheOnlyDoor)
//     and the label flow (TestEveryOperationFlows).
//   - Every change of a guarded path goes through txn.Apply, under the
//     locks of every path it touches, its records durable before it is
//     published.
//   - A guarded commit's walk is linear: node → door → draft → gate → flow
//     → txn → back (TestCommitWalk).
package guard
