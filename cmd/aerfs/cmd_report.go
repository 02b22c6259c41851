package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/evidence"
	htmlreport "github.com/aerfs/aerfs/report"
)

type reportOptions struct {
	out    string
	key    string
	source string
	recent int
}

func newReportCommand() *cobra.Command {
	var o reportOptions
	c := &cobra.Command{
		Use:   "report [BUNDLE] -o report.html",
		Short: "Write a self-contained HTML report of a verified evidence bundle",
		Long: `report verifies an evidence bundle and writes one HTML file that shows it:
a timeline of sessions and verdicts, the refusals by rule and principal, the
records counted per session, per path and per rule, the newest records and
refusals in full, the provenance graph of a source with the changes it led
to, and the diffs of the newest guarded changes. Every record is counted;
the newest --recent of each kind are shown whole, so the page of a year's
log stays a few MB. The page loads nothing from anywhere and runs no script.

Without BUNDLE it exports the log of the workspace (or of --state DIR) to a
temporary bundle first. The page says which key verified the bundle: a key
given with --key verifies its origin; without it the bundle's own key proves
integrity only, and the page says "origin not verified". Without BUNDLE the
log is verified as 'aerfs verify --state' verifies it, against the state
directory's own key, and the page says so.`,
		Example: `  aerfs export -o incident.zip && aerfs report incident.zip --key @trusted.key -o report.html
  aerfs report --state /var/lib/aerfs/ws -o report.html
  aerfs report --source downloads/page.html -o report.html`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.OutOrStdout(), args, o)
		},
	}
	c.Flags().StringVarP(&o.out, "output", "o", "", "the HTML file to write ('-' for standard output)")
	c.Flags().StringVar(&o.key, "key", "", "the trusted public key (text, or @FILE); default: the bundle's own key (origin not verified)")
	c.Flags().StringVar(&o.source, "source", "", "the provenance source: a workspace path or a record id (default: the source with the largest contamination scope)")
	c.Flags().IntVar(&o.recent, "recent", htmlreport.DefaultRecent, "how many of the newest records, refusals and guarded changes the page shows in full (all are counted)")
	c.MarkFlagRequired("output")
	return c
}

func runReport(out io.Writer, args []string, o reportOptions) error {
	if o.recent < 1 {
		return fail(exitUsage, "aerfs report --recent 500 -o report.html", "--recent must be at least 1")
	}
	key := o.key
	if strings.HasPrefix(key, "@") {
		b, err := os.ReadFile(key[1:])
		if err != nil {
			return fail(exitIO, "", "cannot read key: %v", err)
		}
		key = strings.TrimSpace(string(b))
	}
	var bundle, source string
	var t *target
	pr := startProgress("report")
	defer pr.done()
	var took struct{ export, open, render time.Duration }
	fromState := false
	if len(args) == 1 {
		bundle, source = args[0], args[0]
	} else {
		var err error
		t, err = findTargetReading()
		if err != nil {
			return err
		}
		syncLog(t.stateDir)
		exportStart := time.Now()
		tmp, err := os.MkdirTemp("", "aerfs-report-export-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if t.viaDaemon {
			// The daemon's state: it exports the log for the owner,
			// and the report is made here, as the owner.
			bundle = filepath.Join(tmp, "bundle.zip")
			pr.spin("the daemon exports the log")
			err := exportThroughDaemon(t, bundle)
			pr.done()
			if err != nil {
				return err
			}
		} else {
			bundle = filepath.Join(tmp, "bundle")
			if _, err := evidence.ExportProgress(t.stateDir, evidence.Filter{}, bundle, stages(pr, map[string]string{"records": "exporting records", "blobs": "exporting blobs"})); err != nil {
				return fail(exitError, "check it with: aerfs verify --state "+t.stateDir, "cannot export the evidence log: %v", err)
			}
		}
		took.export = time.Since(exportStart)
		source = "state directory " + t.stateDir
		// The live log is verified as aerfs verify --state verifies it:
		// against the state directory's own key.
		if key == "" {
			if key, err = stateKey(t); err != nil {
				return err
			}
			fromState = true
		}
		// A source path is taken as aerfs scope takes it: relative to the
		// current directory inside the workspace.
		if o.source != "" && t.workspace != "" && !looksLikeRecordID(o.source) {
			if o.source, err = workspaceRel(t, o.source); err != nil {
				return err
			}
		}
	}
	openStart := time.Now()
	b, trust, err := htmlreport.OpenProgress(bundle, key, evidence.DefaultLimits,
		stages(pr, map[string]string{"records": "verifying records", "parsing": "reading records"}))
	if err != nil {
		return err
	}
	took.open = time.Since(openStart)
	trust.Source = source
	if fromState {
		trust.StateKey = true
		trust.KeySource = "the state directory's key (" + filepath.Join(t.stateDir, "evidence", "key.pub") + "), as aerfs verify --state checks the live log"
	}
	opts := htmlreport.Options{Source: o.source, Now: time.Now(), Version: buildVersion().Version, Recent: o.recent}
	if o.out == "-" {
		return htmlreport.Render(out, b, trust, opts)
	}
	f, err := os.CreateTemp(filepath.Dir(o.out), "."+filepath.Base(o.out)+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	pr.spin("writing the page")
	renderStart := time.Now()
	err = htmlreport.Render(f, b, trust, opts)
	pr.done()
	took.render = time.Since(renderStart)
	if err != nil {
		f.Close()
		return fail(exitUsage, "give a path from 'aerfs log' or a record id", "%v", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), o.out); err != nil {
		return err
	}
	origin := "origin verified with the key given"
	if trust.StateKey {
		origin = "origin verified with the state directory's key, as aerfs verify --state does"
	} else if !trust.Pinned {
		origin = "origin not verified (no --key)"
	}
	fmt.Fprintf(out, "wrote %s: %d records, key %s (fingerprint %s), %s\n", o.out, len(b.Entries), trust.KeyID,
		trust.Fingerprint[:16], origin)
	if gopts.verbose {
		size := int64(0)
		if fi, err := os.Stat(o.out); err == nil {
			size = fi.Size()
		}
		fmt.Fprintf(out, "  %s written; exporting the log took %s, verifying and reading the bundle %s, making the page %s\n",
			humanSize(size), took.export.Round(time.Millisecond), took.open.Round(time.Millisecond), took.render.Round(time.Millisecond))
	}
	return nil
}

// stateKey is the public key of the state directory's log, as aerfs key
// prints it: read here, or said by the daemon when its state is its own.
func stateKey(t *target) (string, error) {
	if !t.viaDaemon {
		k, err := evidence.PublicKey(t.stateDir)
		if err != nil {
			return "", fail(exitIO, "check it with: aerfs verify --state "+t.stateDir, "cannot read the state directory's key: %v", err)
		}
		return k, nil
	}
	var out, msg bytes.Buffer
	code, refusal, err := daemon.CallRead(t.stateDir, []string{"key"}, &out, &msg)
	switch {
	case err != nil:
		return "", fail(exitNotMounted, "run it as root: sudo aerfs "+strings.Join(os.Args[1:], " "), "reading the state through the aerfs daemon: %v", err)
	case refusal != nil && refusal.Refused:
		return "", fail(exitRefused, refusal.Hint, "%s (rule %s)", refusal.Error, refusal.Rule)
	case refusal != nil:
		return "", fail(exitError, refusal.Hint, "%s", refusal.Error)
	case code != 0:
		return "", fail(exitError, "aerfs key"+t.flags()+" prints it", "cannot read the state directory's key: %s", strings.TrimSpace(msg.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// stages names the stages of a step of the report ("records" of the
// export is "exporting records").
func stages(pr *progress, names map[string]string) evidence.Progress {
	f := pr.fn()
	if f == nil {
		return nil
	}
	return func(stage string, done, total int64) {
		if n, ok := names[stage]; ok {
			stage = n
		}
		f(stage, done, total)
	}
}
