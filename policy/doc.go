// Package policy is aerfs's trusted decision core: path classes, the policy
// file, and Decide, the pure function that says whether a subject may
// perform an operation on a path (DESIGN.md §4). It imports nothing of the
// file system layer and does no I/O except in Load.
//
// # Invariants
//
// Decide is a pure function of its arguments and the immutable *Policy:
// no clock, no OS, no allocation, so the FUSE layer can call it on every
// request and tests can enumerate its input space. Whatever it returns
// carries a Rule whose ID and Reason are written to the evidence log.
//
//   - Identity files are never mutated through the mount (R1), whoever asks.
//   - A memory or control mutation is allowed only to an identified, trusted
//     (USER, SYS), untainted subject, and a rename or link onto such a name
//     only with content of trusted origin and without blocking taint
//     (R2, R3, R7, R9).
//   - A subject in session a never reaches sessions/b/ (R4); a subject
//     outside every session reaches sessions only if trusted (the owner).
//   - The shared namespace changes only by the owner's hand: promotion of an
//     untainted item, or a trusted, untainted owner outside every session
//     (R5).
//   - Untrusted principals never open secrets; trusted ones become
//     SECRET_RISK (R8).
//   - An allowed read adds at least the label's taint to the reader (R6).
//   - Monotonicity: more subject taint, a lower principal or a lost
//     identity never turns a denial into an allowance. Trust only goes down
//     (Lower, CanGrant).
//
// These are checked over the whole finite input space in
// TestExhaustiveProperties, not only by examples.
//
// # Order of the rules
//
// Decide checks, and the first refusal decides:
//
//  1. R9 unidentified: an unidentified caller (pid 0, a vanished process),
//     or one with an invalid principal, is refused anything in a session,
//     anything on a secret, a promotion, and every mutation of a guarded
//     class, of the shared namespace or of the sessions directory. Plain
//     requests pass, because the kernel sends some with pid 0.
//  2. R4 namespace: cross-session access, and access to sessions by an
//     untrusted process outside every session, are refused for every
//     operation including lookup. The sessions directory itself may be
//     listed by anyone identified (the FUSE layer filters its entries) and
//     changed only by the owner.
//  3. R5 promotion: OpPromote names the item in its session (the caller
//     decides the destination name separately); it needs the owner and no
//     blocking taint on the owner or on the item's label. Any other
//     mutation in the shared namespace needs the owner, untainted.
//  4. RW open writer: a rename or link onto a guarded or secret name (or
//     into the shared namespace) of a file open for writing through a plain
//     descriptor (Target.SourceWriting) is refused, whoever asks: the
//     kernel serves that descriptor's writes without aerfs, so they would
//     reach the guarded file with no commit decision.
//  5. R1 immutable.
//  6. R8 secret: untrusted principals may only look a secret up; trusted
//     reads, writes and executions add SECRET_RISK (reads and executions
//     also the label's taint). A secret is also loaded as configuration
//     (.env): a tainted writer's mutation is refused R2, content of
//     untrusted origin renamed or linked onto it R7.
//  7. R3, R2, R7 for mutations of memory, control and the shared namespace,
//     else RA-allowed.
//  8. R6: an allowed read or exec adds the label's taint.
//  9. Otherwise R0-plain.
//
// # Judgement calls
//
// Where DESIGN.md leaves room, the choice is the one that fails closed:
//
//   - An invalid Op, Class or Namespace is refused with R9: it is a caller
//     bug and the monitor cannot reason about it. An invalid principal is
//     treated as unidentified and untrusted.
//
//   - A Target in NSSession without a session id is refused with R4.
//
//   - A rename or link into the shared namespace is checked like one onto a
//     guarded name (R7): otherwise the owner's mv would be a promotion that
//     skips the taint check.
//
//   - Only OpRead and OpExec propagate the label's taint; the FUSE layer
//     decides an O_RDWR open as a read and a write.
//
//   - Anchored patterns also apply from each session directory and from the
//     shared root: an agent working in sessions/<id>/ has its own skills/
//     and .claude/, and they are as consequential as the owner's.
//
//   - "skills/**" matches the skills directory itself: "**" matches zero or
//     more components, and the directory holding guarded files is where
//     they can be renamed or removed all at once.
//
//   - A "!" pattern in a class list takes the paths it matches out of that
//     class, wherever it is written (gitignore's negation without its
//     order); a weaker class may still claim them. The default uses it to
//     leave node_modules to the package manager.
//
//   - A policy file that leaves a key out keeps the default for it, and a
//     class it does not list keeps its default patterns: forgetting a line
//     must not unguard SOUL.md. An explicit [] empties a list on purpose.
//
//   - MayContainGuarded over-approximates: with a pattern that matches at
//     any depth (the default MEMORY.md) every directory may contain a
//     guarded file, and the caller must look inside before an rmdir or a
//     rename of a directory.
//
//   - Lower keeps the new principal on equal levels (SKILL lowered to WEB
//     is WEB), so OriginTaint names the channel the data came through.
//
// # Cost
//
// Patterns are compiled once by Parse. Classify looks wildcard-free names
// up in a map, and each component of the path in a map of the "**/NAME/**"
// directories (the agents' .claude, .cursor …); it matches the rest
// component by component without allocating, after a substring test for
// the literal an anchored pattern needs. "**" is matched without
// backtracking beyond the most recent "**", so the work is bounded by
// pattern length times path depth, and an agent cannot stall the monitor
// with a deep directory tree.
//
// # Threats answered
//
// The adversary controls content from untrusted channels and can make the
// agent perform any file operation. It cannot choose its principal (that is
// bound to the channel by the principal package) and it cannot lower its
// taint. The rules are therefore phrased only in terms of principal, taint,
// session and path class: nothing an adversary writes into a file changes a
// decision about that file. What aerfs cannot see (pipes, sockets) is made
// conservative by tainting whole sessions, outside this package.
//
// # The network
//
// A confined session reaches the network only through the daemon's proxy,
// which asks HostChannel what a host is (the first network.hosts entry that
// matches, else a model endpoint the session's client was started with,
// else web) and DecideConnect whether the session may connect: deny hosts
// never (RN-deny); a session tainted SECRET_RISK only model and trusted
// hosts unless network.secret_egress allows (RN-secret); a web host's bytes
// add the taint of WEB-written content (RN-web, AddTaint), so R2 and R7
// follow as for a file. Host patterns are parsed strictly (ParseHostPattern)
// and compared in one normal form (NormalHost), which refuses the numeric
// spellings a resolver would read as an address. More taint never turns a
// refused connection into an allowed one (TestDecideConnectExhaustive).
//
// # Machinery
//
// A further root may name its client's machinery (roots.NAME.machinery):
// the files the client writes and then runs or loads for itself.
// Policy.Machinery answers, for a path of the root, whether it is one; the
// act gate (package authority) lets an untainted agent session's content
// act there, and only there. Machinery patterns are anchored at a named
// directory or file of the root and take no exclusions (machinery.go); the
// workspace has none.
//
// # Policy files
//
// Parse is strict: unknown or duplicate keys, values of the wrong type,
// unknown principal or taint names, bad globs, anchors and aliases and a
// missing or unsupported version are errors of type *Error, with the line
// and a hint. Patterns are compiled once; Classify does not parse or
// allocate. See configs/aerfs.yaml for the format.
package policy
