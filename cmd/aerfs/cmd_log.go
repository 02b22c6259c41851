package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/logindex"
)

type logOptions struct {
	tail    int
	refused bool
	asJSON  bool
	follow  bool
	path    string
	session string
	since   string
	typ     string
}

func newLogCommand() *cobra.Command {
	var o logOptions
	c := &cobra.Command{
		Use:   "log",
		Short: "Print the evidence log: every verdict, write, session and taint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLog(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	c.Flags().BoolVar(&o.asJSON, "json", false, "one JSON object per line: {idx, id, record}")
	c.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new records")
	c.Flags().StringVar(&o.path, "path", "", "only records about this workspace path (or below it)")
	c.Flags().StringVar(&o.session, "session", "", "only records of this session")
	c.Flags().StringVar(&o.since, "since", "", "only records at or after this time (RFC 3339) or this long ago (e.g. 10m)")
	c.Flags().StringVar(&o.typ, "type", "", "only records of this type (verdict, write, rename, delete, session_start, taint, …)")
	c.Flags().IntVarP(&o.tail, "tail", "n", 0, "only the last N matching records (with -f: then follow)")
	c.Flags().BoolVar(&o.refused, "refused", false, "only refusals (deny verdicts, refused content kept in quarantine)")
	c.Flags().Bool("no-pager", false, "do not page the output on a terminal ($AERFS_PAGER, $PAGER or less)")
	c.RegisterFlagCompletionFunc("type", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return recordTypes, cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

func parseSince(s string) (time.Time, error) { return parseTimeFlag("--since", s) }

// parseTimeFlag reads a time flag: RFC 3339, or a duration ago (10m). The
// error names the flag it came from.
func parseTimeFlag(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fail(exitUsage, "use RFC 3339 (2026-11-22T10:00:00Z) or a duration ago (10m)", "bad %s %q", flag, s)
	}
	return t, nil
}

// recordTypes are the record types a log filter may name: every type the
// evidence format knows.
var recordTypes = evidence.RecordTypes()

// filter is the record filter the flags describe.
func (o logOptions) filter() (evidence.Filter, error) {
	since, err := parseSince(o.since)
	if err != nil {
		return evidence.Filter{}, err
	}
	if o.typ != "" && !slices.Contains(recordTypes, o.typ) {
		return evidence.Filter{}, fail(exitUsage, "record types are "+strings.Join(recordTypes, ", "), "unknown record type %q", o.typ)
	}
	if o.tail < 0 {
		return evidence.Filter{}, fail(exitUsage, "give a count: -n 20", "--tail must not be negative")
	}
	return evidence.Filter{Since: since, Session: o.session, Path: strings.TrimPrefix(o.path, "./"), Type: o.typ}, nil
}

func runLog(ctx context.Context, out io.Writer, o logOptions) error {
	t, err := findTarget(false)
	if err != nil {
		return err
	}
	if r, ok := rootRel(t, o.path); ok {
		o.path = r
	}
	f, err := o.filter()
	if err != nil {
		return err
	}
	print := func(idx int64, id string, r *evidence.Record) error {
		if !f.Match(r) || o.refused && r.Meta.Verdict != "deny" {
			return nil
		}
		if o.asJSON {
			b, err := json.Marshal(struct {
				Idx    int64            `json:"idx"`
				ID     string           `json:"id"`
				Record *evidence.Record `json:"record"`
			}{idx, id, r})
			if err != nil {
				return err
			}
			return writeJSONBytes(out, b)
		}
		_, err := fmt.Fprintln(out, formatRecord(idx, r))
		return err
	}
	syncLog(t.stateDir)
	from := int64(0)
	if keys := indexedSelection(f); keys != nil {
		// The log's index knows the records of a path, a session, a type:
		// only those are read.
		n, err := logFromIndex(t.stateDir, f, keys, o, print)
		if err != nil || !o.follow {
			return err
		}
		from = n
	} else if o.tail > 0 {
		// Keep the last N matches, print them, and follow from there.
		type item struct {
			idx int64
			id  string
			r   *evidence.Record
		}
		var last []item
		err := evidence.ReadAll(t.stateDir, func(idx int64, id string, r *evidence.Record) error {
			from = idx + 1
			if !f.Match(r) || o.refused && r.Meta.Verdict != "deny" {
				return nil
			}
			last = append(last, item{idx, id, r})
			if len(last) > o.tail {
				last = last[1:]
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, it := range last {
			if err := print(it.idx, it.id, it.r); err != nil {
				return err
			}
		}
		if !o.follow {
			return nil
		}
	} else if !o.follow {
		return evidence.ReadAll(t.stateDir, print)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	err = evidence.Follow(ctx, t.stateDir, from, print)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// indexedSelection says which of the filter's terms the log's index can
// answer (the most selective first), nil when none.
func indexedSelection(f evidence.Filter) []func(*logindex.Index) ([]int64, error) {
	switch p := strings.TrimSuffix(f.Path, "/"); {
	case f.Session != "":
		return []func(*logindex.Index) ([]int64, error){func(x *logindex.Index) ([]int64, error) {
			return x.Records(logindex.KindSession, f.Session)
		}}
	case p != "":
		return []func(*logindex.Index) ([]int64, error){func(x *logindex.Index) ([]int64, error) { return x.PathRecords(p) }}
	case f.Type != "":
		return []func(*logindex.Index) ([]int64, error){func(x *logindex.Index) ([]int64, error) {
			return x.Records(logindex.KindType, f.Type)
		}}
	}
	return nil
}

// logFromIndex prints the records the index selects that match the
// filter (the last o.tail of them with --tail), and returns how many
// records the index covers.
func logFromIndex(stateDir string, f evidence.Filter, keys []func(*logindex.Index) ([]int64, error), o logOptions,
	print func(idx int64, id string, r *evidence.Record) error) (int64, error) {
	x, err := openLogIndex(stateDir)
	if err != nil {
		return 0, err
	}
	defer x.Close()
	idxs, err := keys[0](x)
	if err != nil {
		return 0, err
	}
	type item struct {
		idx int64
		id  string
		r   *evidence.Record
	}
	var out []item
	for i := len(idxs) - 1; i >= 0; i-- {
		id, r, err := x.LogRecord(idxs[i])
		if err != nil {
			return 0, err
		}
		if !f.Match(r) || o.refused && r.Meta.Verdict != "deny" {
			continue
		}
		out = append(out, item{idxs[i], id, r})
		if o.tail > 0 && len(out) == o.tail {
			break
		}
	}
	for i := len(out) - 1; i >= 0; i-- {
		if err := print(out[i].idx, out[i].id, out[i].r); err != nil {
			return 0, err
		}
	}
	return x.Through(), nil
}

// openLogIndex opens the log's index for a reader; an index set aside is
// said on stderr (the whole log is read instead, which takes longer).
func openLogIndex(stateDir string) (*logindex.Index, error) {
	x, err := logindex.Open(stateDir)
	if err != nil {
		return nil, fail(exitError, "check it with: aerfs verify --state "+stateDir, "cannot read the evidence log: %v", err)
	}
	warnIndexSetAside(x.Rebuilt())
	return x, nil
}

// warnIndexSetAside tells the owner that the log's index could not be
// used (not when the log has never had one: a workspace never mounted).
func warnIndexSetAside(why string) {
	if why != "" && !strings.HasPrefix(why, "there is no index") {
		fmt.Fprintf(os.Stderr, "aerfs: the log's index was set aside (%s): the whole log is read instead; the daemon rebuilds it at the next mount\n", line(why))
	}
}

// formatRecord is the one-line human form of a record.
func formatRecord(idx int64, r *evidence.Record) string {
	m := r.Meta
	var b strings.Builder
	ts := m.Time
	if t, err := time.Parse(time.RFC3339Nano, m.Time); err == nil {
		ts = t.Format("2006-01-02T15:04:05.000Z")
	}
	// Fixed columns: a record without a verdict or rule shows "-" there,
	// so the columns never shift.
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintf(&b, "%6d %s %-13s %-5s %-16s %-11s", idx, showName(ts), showName(r.Type), dash(showName(m.Verdict)), dash(showName(m.Rule)), dash(showName(r.Principal)))
	if m.Session != "" {
		fmt.Fprintf(&b, " session=%s", showName(m.Session))
	}
	if m.Op != "" {
		fmt.Fprintf(&b, " %s", showName(m.Op))
	}
	if fp := m.FilePath(); fp != "" {
		fmt.Fprintf(&b, " %s", showName(fp))
	}
	if len(r.Taint) > 0 {
		fmt.Fprintf(&b, " taint=%s", showName(strings.Join(r.Taint, "|")))
	}
	switch exe := m.ExePath(); {
	case m.Pid != 0 && exe != "":
		fmt.Fprintf(&b, " (pid %d %s)", m.Pid, showName(exe))
	case m.Pid != 0:
		fmt.Fprintf(&b, " (pid %d)", m.Pid)
	}
	if p := r.Payload; p != nil {
		if from, to := p.FromPath(), p.ToPath(); from != "" || to != "" {
			fmt.Fprintf(&b, " %s -> %s", showName(from), showName(to))
		}
		if p.NewHash != "" {
			fmt.Fprintf(&b, " new=%.12s", p.NewHash)
		}
		if p.Net != nil {
			b.WriteString(" " + netSummary(p.Net))
		}
		if p.Detail != "" {
			fmt.Fprintf(&b, " [%s]", showName(p.Detail))
		}
	}
	if (m.Verdict == "deny" || r.Type == evidence.TypeTaint) && m.Reason != "" {
		fmt.Fprintf(&b, " — %s", showName(m.Reason))
	}
	return b.String()
}

// showName prints a name or a text of a record on its line of the log as
// it is when nothing in it needs escaping, and escaped and in quotes
// otherwise: what a session chose (its file names, its exe, a reason
// naming them) never writes raw bytes to the owner's terminal — no escape
// sequences, no line that looks like another record (internal/printable).
func showName(s string) string {
	if l := line(s); l != s {
		return `"` + l + `"`
	}
	return s
}
