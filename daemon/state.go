package daemon

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
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
func recordIndexRebuilt(mon *guarded, x *logindex.Index, records int64) {
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
func replayAttestations(mon *guarded, x *logindex.Index) (int, error) {
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
// of them (principal.Registry.Retirees); the guards forget them as the
// registry does (principal.Registry.OnRetire).
func keepIndex(ctx context.Context, k *logindex.Keeper, l *evidence.Log, reg *principal.Registry, log zerolog.Logger) {
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

// explainSource answers the explanations (.aerfs/status, aerfs why) about
// what the log said before this mount, from the index.
type explainSource struct {
	k *logindex.Keeper
	l *evidence.Log
}

// What a session's explanation reads of its records before the mount:
// the last of its taint causes and refusals (fs keeps 16 and 10), its
// registration, its burst and release — looking at most at its last
// explainScan records.
const (
	explainCauses   = 16
	explainRefusals = 20
	explainScan     = 4096
)

func (s explainSource) SessionRecords(id string, before int64, fn func(id string, r *evidence.Record)) {
	x := s.k.Index()
	idxs, err := x.Records(logindex.KindSession, id)
	if err != nil {
		return
	}
	var pick []int64
	start, causes, refusals, scanned := false, 0, 0, 0
	for i := len(idxs) - 1; i >= 0 && scanned < explainScan; i-- {
		if idxs[i] >= before {
			continue
		}
		scanned++
		r, err := x.Record(idxs[i])
		if err != nil {
			return
		}
		switch {
		case r.Type == evidence.TypeSessionStart && r.Verdict == "allow" && !start:
			start = true
			pick = append(pick, r.Idx)
		case r.Type == evidence.TypeTaint && causes < explainCauses:
			causes++
			pick = append(pick, r.Idx)
		case (r.Type == evidence.TypeVerdict || r.Type == evidence.TypeQuarantine) && r.Verdict == "deny" && refusals < explainRefusals:
			refusals++
			pick = append(pick, r.Idx)
		}
	}
	// The last burst and release of the session.
	for _, op := range []string{"burst", "session-release"} {
		ops, _ := x.Records(logindex.KindOp, op)
		for i := len(ops) - 1; i >= 0; i-- {
			if r, err := x.Record(ops[i]); err == nil && ops[i] < before && r.Session == id {
				pick = append(pick, ops[i])
				break
			}
		}
	}
	sort.Slice(pick, func(i, j int) bool { return pick[i] < pick[j] })
	for i, idx := range pick {
		if i > 0 && pick[i-1] == idx {
			continue
		}
		if rid, r, err := x.LogRecord(idx); err == nil {
			fn(rid, r)
		}
	}
}

func (s explainSource) PathRecords(path string, fn func(id string, r *evidence.Record) bool) {
	// What was appended a moment ago too.
	if s.l.Flush() != nil || s.k.CatchUp() != nil {
		return
	}
	x := s.k.Index()
	idxs, err := x.Records(logindex.KindPath, path)
	if err != nil {
		return
	}
	for i := len(idxs) - 1; i >= 0; i-- {
		rid, r, err := x.LogRecord(idxs[i])
		if err != nil || !fn(rid, r) {
			return
		}
	}
}

func (s explainSource) StillPending(id string) bool {
	for _, p := range s.k.Index().Pending() {
		if p.ID.Hex() == id {
			return true
		}
	}
	return false
}
