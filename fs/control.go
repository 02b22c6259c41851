package fs

import (
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Promote moves the item at rel (under sessions/<id>/) into the shared
// namespace on behalf of res, if the policy allows it. It returns the new
// path.
func (m *Monitor) Promote(res *principal.Resolved, rel string) (string, policy.Verdict, error) {
	pol := m.Policy()
	st, err := m.lstatRel(rel)
	if err != nil {
		return "", policy.Verdict{}, err
	}
	t, l := m.target(rel, st)
	subj := res.Subject()
	v := m.gatePromote(res, subj, t)
	r := m.verdictRecord(res, subj, policy.OpPromote, rel, v)
	if l != nil && l.Record != "" {
		r.Parents = []string{l.Record}
	}
	if !v.Allow {
		m.Stats.Denied.Add(1)
		m.record(r)
		return "", v, nil
	}
	sessions, shared := pol.Namespaces()
	rest := strings.TrimPrefix(rel, sessions+"/"+t.Session+"/")
	if rest == rel || rest == "" {
		return "", v, &os.PathError{Op: "promote", Path: rel, Err: syscall.EINVAL}
	}
	dst := joinRel(shared, rest)
	if _, err := m.lstatRel(dst); err == nil {
		return "", v, &os.PathError{Op: "promote", Path: dst, Err: syscall.EEXIST}
	}
	dir := path.Dir(dst)
	if err := m.mkdirAll(dir); err != nil {
		return "", v, err
	}
	// The promotion goes through the transaction: the record is durable
	// before the item moves.
	pol = m.Policy()
	guarded := func(p string) bool { c, _, _ := pol.Classify(p); return c.Guarded() }
	defer m.lockPaths(rel, dst)()
	var perr error
	errno := m.apply(&txn{
		keep: []string{rel, dst},
		after: func(old map[string]string) map[string]string {
			out := map[string]string{}
			if guarded(rel) {
				out[rel] = ""
			}
			if guarded(dst) {
				out[dst] = old[rel]
			}
			return out
		},
		prepare: func(map[string]string) ([]*evidence.Record, syscall.Errno) {
			r.Type = evidence.TypePromote
			r.Payload = &evidence.Payload{From: rel, To: dst}
			return []*evidence.Record{r}, 0
		},
		publish: func([]string) syscall.Errno {
			sfd, err := m.openDir(path.Dir(rel))
			if err != nil {
				perr = err
				return gofs.ToErrno(err)
			}
			defer unix.Close(sfd)
			dfd, err := m.openDir(dir)
			if err != nil {
				perr = err
				return gofs.ToErrno(err)
			}
			defer unix.Close(dfd)
			if err := unix.Renameat2(sfd, path.Base(rel), dfd, path.Base(dst), unix.RENAME_NOREPLACE); err != nil {
				perr = &os.PathError{Op: "promote", Path: rel, Err: err}
				return gofs.ToErrno(err)
			}
			return 0
		},
		done: func(ids []string) syscall.Errno {
			m.mu.Lock()
			delete(m.lastRec, rel)
			m.lastRec[dst] = ids[0]
			m.mu.Unlock()
			return 0
		},
	})
	if errno != 0 {
		if perr == nil {
			perr = &os.PathError{Op: "promote", Path: rel, Err: errno}
		}
		return "", v, perr
	}
	m.Stats.Allowed.Add(1)
	return dst, v, nil
}

func (m *Monitor) mkdirAll(rel string) error {
	if rel == "" || rel == "." {
		return nil
	}
	if _, err := m.lstatRel(rel); err == nil {
		return nil
	}
	if err := m.mkdirAll(path.Dir(rel)); err != nil {
		return err
	}
	fd, err := m.openDir(path.Dir(rel))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, path.Base(rel), 0o755); err != nil && err != unix.EEXIST {
		return err
	}
	return nil
}

// Resolve identifies a process for the control socket.
func (m *Monitor) Resolve(pid int) *principal.Resolved { return m.Reg.Resolve(pid) }

// EnsureNamespaces creates the sessions and shared roots in the backing
// directory when they are missing.
func (m *Monitor) EnsureNamespaces() error {
	sessions, shared := m.Policy().Namespaces()
	var root unix.Stat_t
	if err := unix.Fstat(m.rootFd, &root); err != nil {
		return err
	}
	for _, d := range []string{sessions, shared} {
		if _, err := m.lstatRel(d); err == nil {
			continue
		}
		if err := m.mkdirAll(d); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
		// The workspace owner's, like the workspace.
		unix.Fchownat(m.rootFd, d, int(root.Uid), int(root.Gid), unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}
