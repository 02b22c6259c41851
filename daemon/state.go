package daemon

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	aerfs "github.com/aerfs/aerfs/fs"
	"github.com/aerfs/aerfs/logindex"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// # The state a mount reads
//
// A mount reads the log's index (package logindex) as of its last
// checkpoint and the records appended since, never the whole log: the
// sessions ever registered (only those with a process left are brought
// into the registry; the rest stay in the index, the registry's archive),
// the attestations, and what the guarded files held last. The daemon keeps
// the index current while it serves (Keeper.Run) and writes it once more
// after the unmount record, so that the next mount reads nothing else.
// An index that is missing or does not check out is rebuilt from the log
// at mount, and a recovery record (op "index") says why.

// openIndex opens the log's index for the log's writer.
func openIndex(stateDir string, l *evidence.Log, log zerolog.Logger) (*logindex.Keeper, error) {
	start := time.Now()
	k, err := logindex.OpenKeeper(stateDir, l)
	if err != nil {
		return nil, err
	}
	x := k.Index()
	if why := x.Rebuilt(); why != "" && !x.Missing() {
		log.Warn().Str("event", "index").Str("why", why).Int64("records", x.Through()).Dur("took", time.Since(start)).
			Msg("the log's index was set aside and rebuilt from the log")
	} else {
		log.Info().Str("event", "index").Int64("records", x.Through()).Dur("took", time.Since(start)).Msg("the log's index read")
	}
	return k, nil
}

// recordIndexRebuilt says in the log that the mount built the index from
// the whole log: set aside (it did not check out), or missing for a log of
// records records (a log written before the index existed, or whose index
// was removed). A new log has no index and nothing to say.
func recordIndexRebuilt(mon *aerfs.Monitor, x *logindex.Index, records int64) {
	why := x.Rebuilt()
	if why == "" || x.Missing() && records == 0 {
		return
	}
	reason := "the log's index was set aside and rebuilt from the log: " + why
	if x.Missing() {
		reason = fmt.Sprintf("the log's %d records had no index: it was built from the log", records)
	}
	mon.Record(&evidence.Record{Type: evidence.TypeRecovery, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Op: "index", Verdict: "allow", UID: uint32(os.Getuid()), Pid: os.Getpid(),
			Reason: reason}})
}

// sessionArchive answers the registry about the sessions it does not hold,
// from the index.
type sessionArchive struct {
	x *logindex.Index
	// mountStart is the log's size when this mount began: a session whose
	// registration comes later was registered during this mount.
	mountStart int64
}

func (a sessionArchive) archived(s *logindex.Session) (principal.ArchivedSession, bool) {
	p, err := policy.ParsePrincipal(s.Principal)
	if err != nil {
		return principal.ArchivedSession{}, false
	}
	t, _ := parseTaints(s.Taint)
	out := principal.ArchivedSession{ID: s.ID, Principal: p, Parent: s.Parent, Cgroups: s.Cgroups, Taint: t,
		Started: time.Unix(0, s.Started).UTC(), Agent: s.Agent, ThisMount: s.Start >= a.mountStart}
	if s.Ended != 0 {
		out.Ended = time.Unix(0, s.Ended).UTC()
	}
	return out, true
}

func (a sessionArchive) ArchivedSession(id string) (principal.ArchivedSession, bool) {
	s, ok := a.x.Session(id)
	if !ok {
		return principal.ArchivedSession{}, false
	}
	return a.archived(s)
}

func (a sessionArchive) ArchivedCgroup(rel string) (principal.ArchivedSession, bool) {
	s, ok := a.x.SessionByCgroup(rel)
	if !ok {
		return principal.ArchivedSession{}, false
	}
	return a.archived(s)
}

// restoreSessions brings into the registry the sessions registered by an
// earlier mount that have not ended and still have a process in one of
// their cgroups (a session survives a daemon restart in its cgroup). Every
// other session stays in the index: the registry asks it when an id or a
// cgroup it does not know comes up, so an id stays bound to the
// registration that made it across remounts.
func restoreSessions(reg *principal.Registry, x *logindex.Index) error {
	cg := reg.Cgroups()
	if cg == nil {
		return nil // followed by ancestry: no membership survives a restart
	}
	var live []string
	err := x.EachSession(func(s *logindex.Session) error {
		if s.Ended != 0 {
			return nil
		}
		for _, c := range s.Cgroups {
			if b, err := os.ReadFile(cg.Dir(c) + "/cgroup.procs"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				live = append(live, s.ID)
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range live {
		reg.Session(id)
	}
	return nil
}

// replayAttestations restores the attestations the log records into the
// mount's authority monitor, as they were decided (authority.Replay): an
// elevation survives a remount. Tokens are not replayed: a remount voids
// every unspent token, which fails closed.
func replayAttestations(mon *aerfs.Monitor, x *logindex.Index) (int, error) {
	idxs, err := x.Records(logindex.KindOp, "attest")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, i := range idxs {
		_, r, err := x.LogRecord(i)
		if err != nil {
			return n, err
		}
		if replayAttestation(mon, r) {
			n++
		}
	}
	return n, nil
}

// keepIndex keeps the index current while the mount serves, and retires
// the sessions that have ended once the index holds everything recorded
// of them (principal.Registry.Retirees).
func keepIndex(ctx context.Context, k *logindex.Keeper, l *evidence.Log, reg *principal.Registry, retired func(*principal.Session), log zerolog.Logger) {
	// Repeated warnings are limited by the daemon log (RepeatLimiter).
	warn := func(err error, msg string) { log.Warn().Err(err).Msg(msg) }
	go k.Run(ctx, func(err error) {
		warn(err, "the log's index is not written: the next mount reads the records since its last copy")
	})
	t := time.NewTicker(sweepInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reg.Prune()
		cands := reg.Retirees()
		if len(cands) == 0 {
			continue
		}
		if err := l.Flush(); err != nil {
			continue
		}
		if err := k.CatchUp(); err != nil {
			warn(err, "sessions are not retired: the log's index cannot read the log")
			continue
		}
		var ids []string
		for _, s := range reg.Retire(cands) {
			retired(s)
			ids = append(ids, s.ID)
		}
		if len(ids) > 0 {
			log.Info().Str("event", "retire").Strs("sessions", ids).Msg("sessions ended with no process left: retired (kept in the log)")
		}
	}
}

// sweepInterval is how often exited processes are forgotten and ended
// sessions retired: 30 s, or AERFS_SESSION_SWEEP_MS (tests, soak).
func sweepInterval() time.Duration {
	if ms, err := strconv.Atoi(os.Getenv("AERFS_SESSION_SWEEP_MS")); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return 30 * time.Second
}

// retireSession drops what the mount holds about a retired session.
func retireSession(mon *aerfs.Monitor, s *principal.Session) { mon.ForgetSession(s) }

// lastReads is the newest reads record of session id in the index ("" for
// none): where a session back from retirement or a remount continues its
// provenance chain.
func lastReads(x *logindex.Index, id string) string {
	idxs, err := x.Records(logindex.KindSession, id)
	if err != nil {
		return ""
	}
	for i := len(idxs) - 1; i >= 0; i-- {
		r, err := x.Record(idxs[i])
		if err != nil {
			return ""
		}
		if r.Type == evidence.TypeReads {
			return r.ID.Hex()
		}
	}
	return ""
}
