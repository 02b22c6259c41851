package policy

// Principal is the trust level a process was given by the channel it came
// through. Several names share a level (WEB and SKILL, CHANNEL and EXTERNAL):
// they differ in the taint they leave behind, not in what they may do.
type Principal uint8

const (
	External   Principal = iota // another uid, or a label whose binding broke
	Channel                     // messages from other people's channels
	Web                         // fetched from the network
	Skill                       // skills and plugins
	ToolUnauth                  // tools the owner has not vetted
	ToolAuth                    // tools the owner vetted
	User                        // the human owner at the terminal
	Sys                         // aerfs itself and the administrator
	numPrincipals
)

// Level is the principal's rank in the lattice of DESIGN.md §3:
// SYS 5 > USER 4 > TOOL_AUTH 3 > TOOL_UNAUTH 2 > WEB = SKILL 1 > CHANNEL = EXTERNAL 0.
func (p Principal) Level() int {
	switch p {
	case Sys:
		return 5
	case User:
		return 4
	case ToolAuth:
		return 3
	case ToolUnauth:
		return 2
	case Web, Skill:
		return 1
	default:
		return 0
	}
}

// Trusted reports whether p may change memory and control files.
func (p Principal) Trusted() bool { return p.Level() >= User.Level() }

// Valid reports whether p is one of the named principals.
func (p Principal) Valid() bool { return p < numPrincipals }

// Taint is a set of flags that only grows on a subject or a file.
type Taint uint16

const (
	Untrusted Taint = 1 << iota
	InjectionSuspect
	ProxyDerived
	SecretRisk
	CrossSession
	ToolOutput
	SkillOutput
	WebDerived
	numTaintBits = iota
)

// AllTaint is every defined flag.
const AllTaint Taint = 1<<numTaintBits - 1

// Class is what the policy says a workspace path is.
type Class uint8

const (
	Plain Class = iota
	Identity
	Memory
	Control
	Secret
	numClasses
)

// Guarded reports whether mutations of the class are decided at all.
func (c Class) Guarded() bool { return c == Identity || c == Memory || c == Control }

// Strictest is the class of a and b that restricts more: identity, then
// control, memory, secret, plain (the order classification resolves
// overlapping patterns in). A file with names of two classes (a hard link)
// is decided as the stricter.
func Strictest(a, b Class) Class {
	if classRank(b) < classRank(a) {
		return b
	}
	return a
}

// Namespace is the session namespace a path lives in, orthogonal to Class:
// sessions/<id>/MEMORY.md can be both Memory (by glob) and in session <id>.
type Namespace uint8

const (
	NSNone         Namespace = iota // outside sessions/ and shared/
	NSSession                       // under sessions/<id>/, Target.Session names <id>
	NSShared                        // under the shared namespace root
	NSSessionsRoot                  // the sessions/ directory itself (listing it)
)

// Op is the kind of operation a subject asks for.
type Op uint8

const (
	OpLookup     Op = iota // lookup, getattr, readlink, listing a directory
	OpRead                 // open for reading
	OpWrite                // open for writing/truncating/appending, write, truncate, fallocate, copy_file_range into
	OpCreate               // create, mkdir, mknod, symlink at the name
	OpUnlink               // unlink or rmdir of the name (or of a directory containing guarded files)
	OpRenameFrom           // the name is the source of a rename
	OpRenameTo             // the name is the destination of a rename (content comes from Target.Source*)
	OpLink                 // a hard link to or from the name
	OpSetattr              // chmod, chown, utimes
	OpXattr                // setxattr, removexattr
	OpExec                 // open for execution
	OpPromote              // move from sessions/<id>/ into the shared namespace
	numOps
)

// Mutates reports whether op changes the file system.
func (o Op) Mutates() bool {
	switch o {
	case OpLookup, OpRead, OpExec:
		return false
	}
	return true
}

// Subject is the process making a call, as principal/ resolved it.
type Subject struct {
	Principal  Principal
	Taint      Taint  // session taint ∪ the process's own
	Session    string // "" when the process belongs to no session
	Identified bool   // false for pid 0, a vanished process, an unreadable /proc entry
}

// Target is the path an operation is about, as classified and labelled.
type Target struct {
	Class     Class
	Namespace Namespace
	Session   string // the <id> of sessions/<id>/ when Namespace == NSSession

	// Label of the file's current content (zero when unlabelled).
	LabelTaint Taint

	// For OpRenameTo and OpLink onto a guarded name: the origin and taint
	// of the content that would appear under the name. A rename is a
	// write of the source's content.
	SourceOrigin Principal
	SourceTaint  Taint
	HasSource    bool
	// SourceWriting: that content is open for writing through plain
	// descriptors, whose writes the kernel serves without aerfs (kernel
	// passthrough): under a guarded name they would skip every commit
	// decision.
	SourceWriting bool

	// Absent: no file holds the name yet (or only the empty placeholder
	// of the create being committed). The first creation of an identity
	// file may then be allowed (identity_first_create).
	Absent bool
}

// Rule names the rule of DESIGN.md §4 that produced a verdict. The ids are
// stable: they appear in the log and in tests.
type Rule uint8

// Verdict is the outcome of Decide.
type Verdict struct {
	Allow bool
	Rule  Rule
	// AddTaint is what the subject's session gains by the operation
	// (the label's taint on a read, SECRET_RISK on a secret read).
	AddTaint Taint
}

// Entered reports whether ns is a session's or the shared namespace: one
// a file enters only by a session's own writes or a promotion.
func (ns Namespace) Entered() bool { return ns == NSSession || ns == NSShared }

// LinkedSession is the session a file with names in two namespaces is
// decided in (a hard link made before the mount between a session's and
// the shared namespace, or two sessions'): one no session is, so that only
// the owner, outside every session, reaches it (RX-linked-namespaces).
const LinkedSession = "(names in several namespaces)"
