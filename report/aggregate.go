package report

import (
	"cmp"
	"slices"

	"github.com/aerfs/aerfs/evidence"
)

// # Counts, then the newest records in full
//
// The page answers "what happened" at any size of log: who did how much
// (per session), what was touched (per path) and what was refused (per
// rule) are counted over every record; the records themselves are shown in
// full only for the newest (Options.Recent), with the command that lists
// the others.

// DefaultRecent is how many of the newest records, refusals and guarded
// changes the page shows in full.
const DefaultRecent = 500

// The per-session and per-path tables show aggTop rows, then up to
// maxAggRows in all behind a disclosure; the rest are counted.
const (
	aggTop     = 20
	maxAggRows = 100
)

// Counts are what the per-session and per-path tables count.
type Counts struct {
	Records, Allowed, Refused, Quarantined int
	Changes                                int // guarded changes
}

// busier orders rows by their refusals, then guarded changes, then
// records, the most first.
func busier(x, y Counts) int {
	return cmp.Or(cmp.Compare(y.Refused+y.Quarantined, x.Refused+x.Quarantined), cmp.Compare(y.Changes, x.Changes), cmp.Compare(y.Records, x.Records))
}

// SessionRow counts the records of one session (or of a principal acting
// outside sessions).
type SessionRow struct {
	Session, Principal string
	Counts
	First, Last string
}

// PathRow counts the records about one path.
type PathRow struct {
	Path string
	Counts
	Last string
}

// RuleRow counts the verdicts of one rule.
type RuleRow struct {
	Rule                         string
	Allowed, Refused, Quarantine int
}

// Aggregates are the counts over every record of the bundle.
type Aggregates struct {
	Sessions, SessionsMore []SessionRow
	MoreSessions           int
	Paths, PathsMore       []PathRow
	MorePaths              int
	Rules                  []RuleRow
}

// split cuts rows into the first aggTop, the next up to maxAggRows, and
// how many are left.
func split[T any](rows []T) (top, next []T, more int) {
	if len(rows) > maxAggRows {
		more = len(rows) - maxAggRows
		rows = rows[:maxAggRows]
	}
	if len(rows) > aggTop {
		return rows[:aggTop], rows[aggTop:], more
	}
	return rows, nil, more
}

// isChange reports whether a record changed a guarded file.
func isChange(r *evidence.Record) bool {
	switch r.Type {
	case evidence.TypeWrite, evidence.TypeRename, evidence.TypeDelete, evidence.TypeRestore, evidence.TypeApprove:
		return r.Meta.Verdict != "deny"
	}
	return false
}

func aggregate(b *Bundle) Aggregates {
	sess := map[string]*SessionRow{}
	paths := map[string]*PathRow{}
	rules := map[string]*RuleRow{}
	var n int // the current record's weight
	count := func(kind string, allowed, refused, quarantined *int) {
		switch kind {
		case "allow":
			*allowed += n
		case "deny":
			*refused += n
		case "quarantine":
			*quarantined += n
		}
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		r := e.Rec
		kind := markKind(r)
		n = weight(r)
		k := "s:" + r.Meta.Session
		if r.Meta.Session == "" {
			k = "p:" + r.Principal
		}
		s := sess[k]
		if s == nil {
			s = &SessionRow{Session: Printable(orDash(r.Meta.Session)), Principal: Printable(r.Principal), First: fmtTime(e.Time)}
			sess[k] = s
		}
		s.Records++
		s.Last = fmtTime(e.Time)
		count(kind, &s.Allowed, &s.Refused, &s.Quarantined)
		if isChange(r) {
			s.Changes++
		}
		// A connection's "path" is its host: the network table counts
		// those.
		if e.Path != "" && (r.Payload == nil || r.Payload.Net == nil) {
			p := paths[e.Path]
			if p == nil {
				p = &PathRow{Path: e.Path}
				paths[e.Path] = p
			}
			p.Records++
			p.Last = fmtTime(e.Time)
			count(kind, &p.Allowed, &p.Refused, &p.Quarantined)
			if isChange(r) {
				p.Changes++
			}
		}
		if rule := r.Meta.Rule; rule != "" && kind != "event" {
			rr := rules[rule]
			if rr == nil {
				rr = &RuleRow{Rule: Printable(rule)}
				rules[rule] = rr
			}
			count(kind, &rr.Allowed, &rr.Refused, &rr.Quarantine)
		}
	}
	var a Aggregates
	for _, s := range sess {
		a.Sessions = append(a.Sessions, *s)
	}
	slices.SortFunc(a.Sessions, func(x, y SessionRow) int {
		return cmp.Or(busier(x.Counts, y.Counts), cmp.Compare(x.Session, y.Session), cmp.Compare(x.Principal, y.Principal))
	})
	a.Sessions, a.SessionsMore, a.MoreSessions = split(a.Sessions)
	for _, p := range paths {
		a.Paths = append(a.Paths, *p)
	}
	slices.SortFunc(a.Paths, func(x, y PathRow) int { return cmp.Or(busier(x.Counts, y.Counts), cmp.Compare(x.Path, y.Path)) })
	a.Paths, a.PathsMore, a.MorePaths = split(a.Paths)
	for _, r := range rules {
		a.Rules = append(a.Rules, *r)
	}
	slices.SortFunc(a.Rules, func(x, y RuleRow) int {
		return cmp.Or(cmp.Compare(y.Refused+y.Quarantine, x.Refused+x.Quarantine), cmp.Compare(x.Rule, y.Rule))
	})
	return a
}

// Event is one record of the newest-records table.
type Event struct {
	Idx                                      int64
	Time, Type, Kind, Verdict, Rule          string
	Principal, Session, Op, Path, Reason, ID string
}

// recent is the newest n records, newest first, and how many came before.
func recent(b *Bundle, n int) ([]Event, int) {
	var out []Event
	for i := len(b.Entries) - 1; i >= 0 && len(out) < n; i-- {
		e := &b.Entries[i]
		r := e.Rec
		ev := Event{Idx: e.Idx, Time: fmtTime(e.Time), Type: Printable(string(r.Type)), Kind: markKind(r),
			Verdict: Printable(orDash(r.Meta.Verdict)), Rule: Printable(orDash(r.Meta.Rule)), Principal: Printable(r.Principal),
			Session: Printable(orDash(r.Meta.Session)), Op: Printable(r.Meta.Op), Path: e.Path, ID: short(e.ID)}
		if isRefusal(r) || r.Type == evidence.TypeTaint {
			ev.Reason = Printable(r.Meta.Reason)
		}
		out = append(out, ev)
	}
	return out, len(b.Entries) - len(out)
}
