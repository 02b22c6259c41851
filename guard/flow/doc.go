// Package flow is the one place where labels change. Every operation that
// moves content — an open for reading or for writing, the flush of a
// written handle, a commit, a rename or a link, a symlink or another
// object made, a truncate, a promotion, a restore, an adoption, drift —
// calls Next with the operation, the subjects as they are now, the labels
// of what flowed in and the destination; Next computes the new label and
// applies it where no transaction does.
//
// # Invariants
//
//   - The new label is the meet of what flowed in: integrity (origin) and
//     authority stamp only go down, taint only grows. Only an explicit,
//     recorded act of the owner (a restore, an approval, an edit, an
//     adoption) puts the owner's label on content.
//   - A label is built nowhere else (TestLabelsFlowInOnePlace): the other
//     rooms store, bind and read what Next returns.
//   - A reader gains what it reads: the taint the policy's verdict adds,
//     the record of the version read (provenance), the class of its
//     content (the authority floor of its session).
//
// # Threat
//
// Content of untrusted origin reaches a guarded file, or acts, by passing
// through an operation whose label rule forgot to carry its origin: the
// seams between open, flush, rename and link are where labels are lost.
package flow
