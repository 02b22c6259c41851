package fs

import (
	"context"
	"os"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// check is one decision a mutation needs.
type check struct {
	op  policy.Op
	rel string
	t   policy.Target
	l   *Label
	// v is the gate's verdict, set by decideAll (unset for a trivial
	// check it did not need to decide).
	v policy.Verdict
}

func (c check) trivial() bool {
	return c.t.Class == policy.Plain && c.t.Namespace == policy.NSNone && c.l == nil
}

// decideAll runs every check through the gate; the first refusal wins.
// When every check is about a plain, unlabelled path outside the
// namespaces, the caller is not even resolved.
func (m *Monitor) decideAll(ctx context.Context, checks []check) (*principal.Resolved, syscall.Errno) {
	all := true
	for _, c := range checks {
		all = all && c.trivial()
	}
	if all && !m.anyHeld.Load() {
		return nil, 0
	}
	res := m.caller(ctx)
	if all && !res.Session.Quarantined() {
		return res, 0
	}
	for i, c := range checks {
		v, errno := m.gate(ctx, res, c.op, c.rel, c.t, c.l)
		checks[i].v = v
		if errno != 0 {
			return res, errno
		}
	}
	return res, 0
}

// createCheck decides creating something at rel.
func (n *Node) createCheck(ctx context.Context, name string) (string, policy.Target, syscall.Errno) {
	if isReserved(name) {
		return "", policy.Target{}, syscall.EACCES
	}
	rel := n.childRel(name)
	t, l := n.m.target(rel, nil)
	// Directories, symlinks, FIFOs and devices never count as the first
	// creation of an identity file: only regular content does.
	t.Absent = false
	_, errno := n.m.decideAll(ctx, []check{{op: policy.OpCreate, rel: rel, t: t, l: l}})
	return rel, t, errno
}

func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	_, t, errno := n.createCheck(ctx, name)
	if errno != 0 {
		return nil, errno
	}
	ch, errno := n.loopMkdir(ctx, name, mode, out)
	if errno == 0 {
		setEntryTimeouts(out, t.Class, t.Namespace)
	}
	return ch, errno
}

func (n *Node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	rel, t, errno := n.createCheck(ctx, name)
	if errno != 0 {
		return nil, errno
	}
	ch, errno := n.loopMknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		setEntryTimeouts(out, t.Class, t.Namespace)
		n.m.labelCreated(ctx, rel, out)
	}
	return ch, errno
}

func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	rel, t, errno := n.createCheck(ctx, name)
	if errno != 0 {
		return nil, errno
	}
	ch, errno := n.loopSymlink(ctx, target, name, out)
	if errno == 0 {
		setEntryTimeouts(out, t.Class, t.Namespace)
		n.m.labelCreated(ctx, rel, out)
	}
	return ch, errno
}

// Link gives a file a second name: decided as a mutation of the file when
// it is guarded, and as a write of its content under the new name.
func (n *Node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if isReserved(name) {
		return nil, syscall.EACCES
	}
	tn, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV // .aerfs/status (statusfile.go) is no backing file
	}
	src := tn.rel()
	sst, err := n.m.lstatRel(src)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	dst := n.childRel(name)
	ts, ls := n.m.target(src, sst)
	td, _ := n.m.target(dst, nil)
	td.Absent = td.Absent && sst.Mode&syscall.S_IFMT == syscall.S_IFREG
	if ts.Class != policy.Plain {
		td.Class = strictest(td.Class, ts.Class)
	}
	withSource(&td, ls)
	checks := []check{{op: policy.OpLink, rel: src, t: ts, l: ls}, {op: policy.OpLink, rel: dst, t: td, l: nil}}
	res, errno := n.m.decideAll(ctx, checks)
	if errno != 0 {
		n.m.keepRefusedArrival(res, checks, policy.OpLink, src, sst)
		return nil, errno
	}
	var ch *gofs.Inode
	link := func([]string) syscall.Errno {
		var errno syscall.Errno
		ch, errno = n.loopLink(ctx, target, name, out)
		return errno
	}
	if c, _, _ := n.m.Policy().Classify(dst); !c.Guarded() || sst.Mode&syscall.S_IFMT != syscall.S_IFREG || res == nil {
		errno = link(nil)
	} else {
		// The content arrives under a guarded name: a write of it.
		defer n.m.lockPaths(src, dst)()
		subj := res.Subject()
		errno = n.m.apply(&txn{
			keep:  []string{src, dst},
			after: func(old map[string]string) map[string]string { return map[string]string{dst: old[src]} },
			prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
				r := n.m.writeRecord(res, subj, dst, old[dst], old[src], checks[1].v)
				r.Meta.Op = "link"
				return []*evidence.Record{r}, 0
			},
			publish: link,
			done: func(ids []string) syscall.Errno {
				n.m.setLastRecord(dst, ids[0])
				return 0
			},
		})
	}
	if errno == 0 {
		setEntryTimeouts(out, td.Class, td.Namespace)
	}
	return ch, errno
}

// strictest orders classes by how much they restrict.
func strictest(a, b policy.Class) policy.Class {
	rank := func(c policy.Class) int {
		switch c {
		case policy.Identity:
			return 4
		case policy.Control:
			return 3
		case policy.Memory:
			return 2
		case policy.Secret:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// withSource marks t as receiving the content labelled l: a rename or link
// onto a name is a write of that content.
func withSource(t *policy.Target, l *Label) {
	t.HasSource = true
	t.SourceOrigin = policy.User
	if l != nil {
		t.SourceOrigin = l.Origin
		t.SourceTaint = l.Taint
	}
}

// Unlink removes a name. A guarded one goes through the transaction: its
// content is kept and the delete recorded before the name goes.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	rel := n.childRel(name)
	st, err := n.m.lstatRel(rel)
	if err != nil {
		return gofs.ToErrno(err)
	}
	t, l := n.m.target(rel, st)
	checks := []check{{op: policy.OpUnlink, rel: rel, t: t, l: l}}
	res, errno := n.m.decideAll(ctx, checks)
	if errno != 0 {
		return errno
	}
	if !t.Class.Guarded() || res == nil {
		if errno := gofs.ToErrno(n.m.unlinkRel(rel, 0)); errno != 0 {
			return errno
		}
		if st.Nlink <= 1 {
			n.m.forgetInode(keyOf(st))
		}
		return 0
	}
	defer n.m.lockPaths(rel)()
	var gone *syscall.Stat_t
	return n.m.apply(&txn{
		keep:  []string{rel},
		after: func(map[string]string) map[string]string { return map[string]string{rel: ""} },
		prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
			return []*evidence.Record{n.m.changeRecord(res, checks[0].v, evidence.TypeDelete, rel, &evidence.Payload{OldHash: old[rel]})}, 0
		},
		publish: func([]string) syscall.Errno {
			gone, _ = n.m.lstatRel(rel) // a commit since the decision may have replaced the inode
			return gofs.ToErrno(n.m.unlinkRel(rel, 0))
		},
		done: func(ids []string) syscall.Errno {
			if gone != nil && gone.Nlink <= 1 {
				n.m.forgetInode(keyOf(gone))
			}
			n.m.setLastRecord(rel, ids[0])
			return 0
		},
	})
}

func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	rel := n.childRel(name)
	t, _ := n.m.target(rel, nil)
	if _, errno := n.m.decideAll(ctx, []check{{op: policy.OpUnlink, rel: rel, t: t, l: nil}}); errno != 0 {
		return errno
	}
	return gofs.ToErrno(n.m.unlinkRel(rel, unix.AT_REMOVEDIR))
}

// Rename decides the source leaving its name and the content arriving at
// the destination; for RENAME_EXCHANGE both ways; for a directory, every
// file below it whose class changes or is guarded.
func (n *Node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if isReserved(name) || isReserved(newName) {
		return syscall.EACCES
	}
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	src, dst := n.childRel(name), np.childRel(newName)
	sst, err := n.m.lstatRel(src)
	if err != nil {
		return gofs.ToErrno(err)
	}
	dstSt, _ := n.m.lstatRel(dst)
	checks := n.m.renameChecks(src, dst, sst, dstSt)
	if flags&unix.RENAME_EXCHANGE != 0 && dstSt != nil {
		checks = append(checks, n.m.renameChecks(dst, src, dstSt, sst)...)
	}
	res, errno := n.m.decideAll(ctx, checks)
	if errno != 0 {
		n.m.keepRefusedArrival(res, checks, policy.OpRenameTo, src, sst)
		return errno
	}
	exchange := flags&unix.RENAME_EXCHANGE != 0 && dstSt != nil
	rename := func([]string) syscall.Errno {
		return n.loopRename(ctx, name, newParent, newName, flags)
	}
	forgetReplaced := func() {
		if dstSt != nil && dstSt.Nlink <= 1 && !exchange && dstSt.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			// The file renamed over is gone; its inode number will be reused.
			n.m.forgetInode(keyOf(dstSt))
		}
	}
	mv := n.m.renameMoves(src, dst, sst, exchange)
	if res == nil || !mv.guarded() {
		if errno := rename(nil); errno != 0 {
			return errno
		}
		forgetReplaced()
		return 0
	}
	defer n.m.lockPaths(append(mv.keep(), mv.guardedPaths()...)...)()
	subj := res.Subject()
	verdict := func(to string) policy.Verdict {
		for _, c := range checks {
			if c.op == policy.OpRenameTo && c.rel == to {
				return c.v
			}
		}
		return policy.Verdict{}
	}
	return n.m.apply(&txn{
		keep:  mv.keep(),
		after: mv.after,
		prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
			var recs []*evidence.Record
			if mv.recordRename {
				// A guarded name (or a directory that may hold some)
				// leaves its place.
				recs = append(recs, n.m.changeRecord(res, checks[0].v, evidence.TypeRename, src, &evidence.Payload{From: src, To: dst}))
			}
			for _, p := range mv.pairs {
				if p.toGuarded && p.regular {
					// The content under a guarded name changed: a write.
					r := n.m.writeRecord(res, subj, p.to, old[p.to], old[p.from], verdict(p.to))
					r.Meta.Op = "rename"
					recs = append(recs, r)
				}
			}
			return recs, 0
		},
		publish: rename,
		done: func(ids []string) syscall.Errno {
			forgetReplaced()
			k := 0
			if mv.recordRename {
				n.m.mu.Lock()
				delete(n.m.lastRec, src)
				n.m.mu.Unlock()
				k = 1
			}
			var errno syscall.Errno
			for _, p := range mv.pairs {
				if p.toGuarded && p.regular {
					nst, _ := n.m.lstatRel(p.to)
					h, _ := n.m.Expected(p.to)
					if e := n.m.bindWrite(subj, p.to, h, ids[k], nst); e != 0 {
						errno = e
					}
					k++
				}
			}
			return errno
		},
	})
}

// move is one name a rename moves: from, to, and what is guarded.
type move struct {
	from, to               string
	fromGuarded, toGuarded bool
	regular                bool
}

// moves is every name a rename moves (a directory's files below it too;
// both ways for an exchange).
type moves struct {
	pairs        []move
	recordRename bool
}

func (m *Monitor) renameMoves(src, dst string, sst *syscall.Stat_t, exchange bool) *moves {
	pol := m.Policy()
	mv := &moves{}
	add := func(from, to string, st *syscall.Stat_t) {
		cf, _, _ := pol.Classify(from)
		ct, _, _ := pol.Classify(to)
		mv.pairs = append(mv.pairs, move{from: from, to: to, fromGuarded: cf.Guarded(), toGuarded: ct.Guarded(),
			regular: st != nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG})
	}
	isDir := sst.Mode&syscall.S_IFMT == syscall.S_IFDIR
	add(src, dst, sst)
	if exchange {
		dstSt, _ := m.lstatRel(dst)
		add(dst, src, dstSt)
	}
	if isDir && !exchange && (pol.MayContainGuarded(src) || pol.MayContainGuarded(dst)) {
		m.walkFiles(src, func(sub string, st *syscall.Stat_t) {
			add(joinRel(src, sub), joinRel(dst, sub), st)
		})
	}
	cs, _, _ := pol.Classify(src)
	mv.recordRename = cs.Guarded() || isDir && (pol.MayContainGuarded(src) || pol.MayContainGuarded(dst))
	return mv
}

// guarded reports whether the rename touches a guarded name.
func (mv *moves) guarded() bool {
	if mv.recordRename {
		return true
	}
	for _, p := range mv.pairs {
		if p.fromGuarded || p.toGuarded {
			return true
		}
	}
	return false
}

// keep is every path whose content the rename needs: each guarded name's
// previous version and each source of content arriving at a guarded name.
func (mv *moves) keep() []string {
	var out []string
	for _, p := range mv.pairs {
		if p.fromGuarded || p.toGuarded && p.regular {
			out = append(out, p.from)
		}
		if p.toGuarded {
			out = append(out, p.to)
		}
	}
	return out
}

func (mv *moves) guardedPaths() []string {
	var out []string
	for _, p := range mv.pairs {
		if p.fromGuarded {
			out = append(out, p.from)
		}
		if p.toGuarded {
			out = append(out, p.to)
		}
	}
	return out
}

// after is what every guarded name holds once the rename is published.
func (mv *moves) after(old map[string]string) map[string]string {
	out := map[string]string{}
	for _, p := range mv.pairs {
		if p.fromGuarded {
			if _, set := out[p.from]; !set {
				out[p.from] = ""
			}
		}
	}
	for _, p := range mv.pairs {
		if p.toGuarded {
			out[p.to] = old[p.from]
		}
	}
	return out
}

// renameChecks lists what moving src (stat sst) to dst needs.
func (m *Monitor) renameChecks(src, dst string, sst, dstSt *syscall.Stat_t) []check {
	ts, ls := m.target(src, sst)
	td, ld := m.target(dst, dstSt)
	td.Absent = td.Absent && sst.Mode&syscall.S_IFMT == syscall.S_IFREG
	if ts.Class != policy.Plain && sst.Mode&syscall.S_IFMT == syscall.S_IFREG {
		// A guarded inode under a plain name keeps its class.
		if c, _, _ := m.Policy().Classify(dst); c == policy.Plain {
			td.Class = ts.Class
		}
	}
	withSource(&td, ls)
	checks := []check{{op: policy.OpRenameFrom, rel: src, t: ts, l: ls}, {op: policy.OpRenameTo, rel: dst, t: td, l: ld}}
	if sst.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		pol := m.Policy()
		if pol.MayContainGuarded(src) || pol.MayContainGuarded(dst) {
			m.walkFiles(src, func(sub string, st *syscall.Stat_t) {
				from, to := joinRel(src, sub), joinRel(dst, sub)
				tf, lf := m.target(from, st)
				tt, _ := m.target(to, nil)
				withSource(&tt, lf)
				checks = append(checks, check{op: policy.OpRenameFrom, rel: from, t: tf, l: lf}, check{op: policy.OpRenameTo, rel: to, t: tt, l: nil})
			})
		}
	}
	return checks
}

// walkFiles calls fn for every entry below the backing directory rel.
func (m *Monitor) walkFiles(rel string, fn func(sub string, st *syscall.Stat_t)) {
	var walk func(sub string)
	walk = func(sub string) {
		fd, err := m.openDir(joinRel(rel, sub))
		if err != nil {
			return
		}
		f := os.NewFile(uintptr(fd), sub)
		names, _ := f.Readdirnames(-1)
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			s := (*syscall.Stat_t)(unsafePointer(&st))
			child := joinRel(sub, name)
			fn(child, s)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				walk(child)
			}
		}
		f.Close()
	}
	walk("")
}

// Setattr decides a truncate as a write and chmod/chown/utimes as a
// metadata change. A truncate of a guarded file without a staging handle
// is committed like any other write.
func (n *Node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	rel := n.rel()
	st, err := n.m.lstatRel(rel)
	if err != nil {
		return gofs.ToErrno(err)
	}
	t, l := n.m.target(rel, st)
	sz, sizeSet := in.GetSize()
	var checks []check
	if sizeSet {
		checks = append(checks, check{op: policy.OpWrite, rel: rel, t: t, l: l})
	}
	if in.Valid&^fuse.FATTR_SIZE&^fuse.FATTR_FH&^fuse.FATTR_LOCKOWNER != 0 {
		checks = append(checks, check{op: policy.OpSetattr, rel: rel, t: t, l: l})
	}
	g, staged := f.(*guardedFile)
	if staged && sizeSet {
		// Decided at open; the new size is staged and decided at commit.
		checks = checks[1:]
	}
	res, errno := n.m.decideAll(ctx, checks)
	if errno != 0 {
		return errno
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		// A truncate or chown by an unprivileged caller (the kernel asks,
		// having left set-ID clearing to the filesystem).
		n.m.killSUIDGID(ctx, rel, st)
	}
	if res != nil && !t.Class.Guarded() && sizeSet {
		// A plain file truncated by a labelled writer carries its label,
		// stored before the change: a label that cannot be kept would be
		// lost taint.
		if nl := mergeLabels(l, labelForWriter(res.Subject())); nl != nil {
			if err := n.m.Labels.Set(keyOf(st), nl); err != nil {
				n.m.log.Error().Err(err).Str("path", rel).Msg("label not stored: truncate refused")
				return syscall.EIO
			}
		}
	}
	rest := *in
	rest.Valid &^= fuse.FATTR_KILL_SUIDGID
	if sizeSet && (staged || t.Class.Guarded()) {
		if staged {
			if errno := g.Setattr(ctx, &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE, Size: sz}}, out); errno != 0 {
				return errno
			}
		} else if errno := n.m.truncateGuarded(ctx, res, rel, sz); errno != 0 {
			return errno
		}
		rest.Valid &^= fuse.FATTR_SIZE
	}
	var fh gofs.FileHandle = f
	if staged {
		fh = nil
	}
	if rest.Valid&^fuse.FATTR_FH&^fuse.FATTR_LOCKOWNER != 0 {
		if errno := n.loopSetattr(ctx, fh, &rest, out); errno != 0 {
			return errno
		}
	}
	n.m.rebind(rel)
	if staged {
		return g.Getattr(ctx, out)
	}
	return n.Getattr(ctx, f, out)
}

func (m *Monitor) truncateGuarded(ctx context.Context, res *principal.Resolved, rel string, size uint64) syscall.Errno {
	src, _ := m.openFileRel(rel, unix.O_RDONLY)
	var cur int64
	if src != nil {
		defer src.Close()
		if fi, err := src.Stat(); err == nil {
			cur = fi.Size()
		}
	}
	f, _, err := m.stagingFor(max(cur, int64(size)))
	if err != nil {
		return syscall.EIO
	}
	defer f.Close()
	if src != nil {
		_, _ = f.ReadFrom(src)
	}
	if err := f.Truncate(int64(size)); err != nil {
		return gofs.ToErrno(err)
	}
	return m.commitFrom(ctx, res, rel, f)
}

// rebind re-binds a label's fingerprint after a change made through the
// mount (chmod, utimes, xattr change the ctime).
func (m *Monitor) rebind(rel string) {
	st, err := m.lstatRel(rel)
	if err != nil {
		return
	}
	k := keyOf(st)
	if l := m.Labels.Get(k); l != nil && !l.fingerprintMatches(st) {
		l.bindFingerprint(st)
		m.Labels.Set(k, l)
	}
}

func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if errno := n.xattrCheck(ctx); errno != 0 {
		return errno
	}
	n.xattrs.Store(xattrUnknown)
	errno := n.LoopbackNode.Setxattr(ctx, attr, data, flags)
	n.m.rebind(n.rel())
	return errno
}

func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if errno := n.xattrCheck(ctx); errno != 0 {
		return errno
	}
	n.xattrs.Store(xattrUnknown)
	errno := n.LoopbackNode.Removexattr(ctx, attr)
	n.m.rebind(n.rel())
	return errno
}

func (n *Node) xattrCheck(ctx context.Context) syscall.Errno {
	rel := n.rel()
	st, _ := n.m.lstatRel(rel)
	t, l := n.m.target(rel, st)
	_, errno := n.m.decideAll(ctx, []check{{op: policy.OpXattr, rel: rel, t: t, l: l}})
	return errno
}

// Getxattr answers from memory for a file known to have no extended
// attributes at all. `ls -l` asks for two per entry (security.selinux,
// system.posix_acl_access); the kernel caches the ACL answer per inode
// (EnableAcl) but not the other one. The first request lists the file's
// attributes once; later ones cost no system call. Setting or removing an
// attribute through the mount forgets what was learned.
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	switch n.xattrs.Load() {
	case xattrNone:
		return 0, absentXattr(attr)
	case xattrUnknown:
		sz, errno := n.LoopbackNode.Listxattr(ctx, nil)
		switch {
		case errno == 0 && sz == 0:
			n.xattrs.Store(xattrNone)
			return 0, absentXattr(attr)
		case errno == 0:
			n.xattrs.Store(xattrSome)
		}
	}
	return n.LoopbackNode.Getxattr(ctx, attr, dest)
}

// selinuxLabel is the attribute that holds a file's SELinux context.
const selinuxLabel = "security.selinux"

// noSELinux: the host kernel runs without SELinux (it creates /sys/fs/selinux
// when SELinux is enabled).
var noSELinux = func() bool {
	_, err := os.Stat("/sys/fs/selinux")
	return os.IsNotExist(err)
}()

// absentXattr is the answer for attr on a file that has no extended
// attributes. It is ENODATA, except for the SELinux context on a host
// without SELinux: there the mount answers as a filesystem without security
// labels does, "not supported". Both mean "no context", but `ls -l` (which
// asks every entry for its context) stops asking for the rest of the
// filesystem after "not supported", so a long listing costs one round trip
// per entry fewer. A file that does carry attributes gets the backing
// file's own answer, so a label set through the mount is read back.
func absentXattr(attr string) syscall.Errno {
	if attr == selinuxLabel && noSELinux {
		return syscall.EOPNOTSUPP
	}
	return syscall.ENODATA
}

// CopyFileRange into a guarded file lands in its staging file like any
// write; between plain files it is the loopback's server-side copy.
func (n *Node) CopyFileRange(ctx context.Context, fhIn gofs.FileHandle, offIn uint64, out *gofs.Inode, fhOut gofs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	if g, ok := fhOut.(*guardedFile); ok {
		r, ok := fhIn.(gofs.FileReader)
		if !ok {
			return 0, syscall.EOPNOTSUPP
		}
		if length > 1<<20 {
			length = 1 << 20
		}
		buf := make([]byte, length)
		rr, errno := r.Read(ctx, buf, int64(offIn))
		if errno != 0 {
			return 0, errno
		}
		data, st := rr.Bytes(buf)
		if !st.Ok() {
			return 0, syscall.EIO
		}
		return g.Write(ctx, data, int64(offOut))
	}
	return n.LoopbackNode.CopyFileRange(ctx, unwrapFile(fhIn), offIn, out, unwrapFile(fhOut), offOut, length, flags)
}

func unwrapFile(f gofs.FileHandle) gofs.FileHandle {
	switch x := f.(type) {
	case *plainFile:
		return x.LoopbackFile
	case *guardedReader:
		return x.FileHandle
	}
	return f
}

// keepVersion stores the current content of rel as a blob before it is
// replaced or removed.
func (m *Monitor) keepVersion(rel string) (string, syscall.Errno) {
	h, err := m.putBlobRel(rel)
	if err != nil {
		m.log.Error().Err(err).Str("path", rel).Msg("cannot keep previous version")
		return "", syscall.EIO
	}
	return h, 0
}

func (m *Monitor) putBlobRel(rel string) (string, error) {
	f, err := m.openFileRel(rel, unix.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return m.rec.PutBlobFile(fdPath(f))
}

func (m *Monitor) forgetInode(k fileKey) {
	m.mu.Lock()
	delete(m.guarded, k)
	m.mu.Unlock()
	m.Labels.Set(k, nil)
	m.forgetLookers(k)
}

// changeRecord is the record of a delete or rename of rel by res.
func (m *Monitor) changeRecord(res *principal.Resolved, v policy.Verdict, typ, rel string, p *evidence.Payload) *evidence.Record {
	subj := res.Subject()
	return &evidence.Record{Type: typ, Principal: subj.Principal.String(), Taint: taintNames(subj.Taint),
		Parents: m.parentsFor(res, rel),
		Meta: evidence.Meta{Path: rel, Op: opForType(typ), Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Rule: v.Rule.ID(), Reason: v.Rule.Reason()}, Payload: p}
}

func opForType(typ string) string {
	switch typ {
	case evidence.TypeDelete:
		return "unlink"
	case evidence.TypeRename:
		return "rename"
	}
	return typ
}

// setLastRecord names the record of rel's current version.
func (m *Monitor) setLastRecord(rel, id string) {
	m.mu.Lock()
	m.lastRec[rel] = id
	m.mu.Unlock()
}

// keepRefusedArrival keeps the content of a rename or link refused at a
// guarded name (an editor's or an agent's temporary file renamed over
// MEMORY.md) in quarantine, as a refused commit's is: aerfs pending shows
// it with a diff and aerfs approve commits it.
func (m *Monitor) keepRefusedArrival(res *principal.Resolved, checks []check, op policy.Op, src string, sst *syscall.Stat_t) {
	if res == nil || sst == nil || sst.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	for _, c := range checks {
		if c.op != op || c.v.Allow || c.v.Rule == policy.RuleUnset || c.rel == src || !c.t.Class.Guarded() {
			continue
		}
		h, err := m.putBlobRel(src)
		if err != nil {
			m.log.Error().Err(err).Str("path", c.rel).Msg("refused content not kept")
			return
		}
		base, _ := m.keepCurrent(c.rel)
		subj := res.Subject()
		r := m.verdictRecord(res, subj, op, c.rel, c.v)
		r.Type, r.Meta.Verdict = evidence.TypeQuarantine, "deny"
		r.Payload = &evidence.Payload{OldHash: base, NewHash: h, From: src, Detail: "quarantined"}
		if _, err := m.mustRecord(r); err != nil {
			m.log.Error().Err(err).Str("path", c.rel).Msg("refused content not recorded")
			return
		}
		m.Stats.Quarantined.Add(1)
		m.log.Info().Str("path", c.rel).Str("from", src).Str("rule", r.Meta.Rule).Str("blob", h).Msg("content kept in quarantine")
		return
	}
}
