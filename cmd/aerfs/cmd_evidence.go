package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/evidence"
)

func verifyExit(k evidence.Kind) int {
	switch k {
	case evidence.KindIntegrity:
		return exitIntegrity
	case evidence.KindSchema:
		return exitSchema
	case evidence.KindSignature:
		return exitSignature
	case evidence.KindIO:
		return exitIO
	}
	return exitError
}

func isUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.HasPrefix(s, "accepts ") || strings.HasPrefix(s, "requires at least")
}

func newKeyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "key",
		Short: "Print the public key that verifies this workspace's checkpoints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			k, err := evidence.PublicKey(t.stateDir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), k)
			return nil
		},
	}
}

func newExportCommand() *cobra.Command {
	var o logOptions
	var out string
	var asJSON bool
	c := &cobra.Command{
		Use:   "export -o OUT",
		Short: "Write a self-contained, verifiable evidence bundle (a directory, or OUT.zip)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			f, err := o.filter()
			if err != nil {
				return err
			}
			syncLog(t.stateDir)
			start := time.Now()
			var m *evidence.Manifest
			say := cmd.OutOrStdout()
			if out == "-" {
				// The zip itself on standard output; the summary on
				// standard error.
				m, err = evidence.ExportZip(t.stateDir, f, cmd.OutOrStdout())
				say = cmd.ErrOrStderr()
			} else {
				pr := startProgress("export")
				m, err = evidence.ExportProgress(t.stateDir, f, out, pr.fn())
				pr.done()
			}
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.Marshal(struct {
					Output string `json:"output"`
					*evidence.Manifest
				}{out, m})
				if err != nil {
					return err
				}
				return writeJSONBytes(say, b)
			}
			fmt.Fprintf(say, "exported %s: %d records, %d blobs, tree size %d, root %s\n",
				out, m.RecordCount, m.BlobCount, m.TreeSize, m.RootHash)
			if gopts.verbose {
				fmt.Fprintf(say, "  %d parent records outside the selection proven by id; checkpoint of %s signed by key %s; took %s\n",
					m.RefCount, m.Origin, m.KeyID, time.Since(start).Round(time.Millisecond))
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "where to write the bundle (a directory, a path ending in .zip, or '-' for a zip on standard output)")
	c.Flags().StringVar(&o.path, "path", "", "only records about this path")
	c.Flags().StringVar(&o.session, "session", "", "only records of this session")
	c.Flags().StringVar(&o.since, "since", "", "only records at or after this time")
	c.Flags().BoolVar(&asJSON, "json", false, "print the bundle's manifest as JSON (on standard error with -o -)")
	c.MarkFlagRequired("output")
	return c
}

func newVerifyCommand() *cobra.Command {
	var key string
	var asJSON bool
	c := &cobra.Command{
		Use:   "verify [BUNDLE]",
		Short: "Verify an evidence bundle offline, or the live log with --state",
		Long: `verify checks schemas, record ids, blob hashes, parents, the Merkle root,
the inclusion proofs and the checkpoint signature.

A bundle carries its own public key, and a bundle checked against that key
proves only that it is consistent — anyone can make a consistent bundle.
Give the key you trust with --key (the output of 'aerfs key' on the
machine, kept where you keep keys) to check its origin as well. Without
--key verify checks integrity, says in plain words that the origin is not
verified, and exits 14.

Exit codes: 0 verified (integrity and origin), 14 integrity verified but
origin not (no --key), 10 integrity failure, 11 schema failure, 12
signature failure (not signed by the given key), 13 I/O error.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd.OutOrStdout(), args, key, asJSON)
		},
	}
	c.Flags().StringVar(&key, "key", "", "the trusted public key (text, or @FILE); default: the bundle's own key")
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object (also when verification fails; the exit code is the same)")
	return c
}

// verifyResult is what verify --json prints: the report when the checks
// ran, and the failure's kind and reason when they did not pass.
type verifyResult struct {
	OK             bool   `json:"ok"`
	OriginVerified bool   `json:"origin_verified"`
	Source         string `json:"source,omitempty"`
	Records        int64  `json:"records"`
	TreeSize       int64  `json:"tree_size"`
	Root           string `json:"root,omitempty"`
	KeyID          string `json:"key_id,omitempty"`
	KeySource      string `json:"key_source,omitempty"`
	Complete       bool   `json:"complete"`
	Blobs          int64  `json:"blobs"`
	Pruned         int64  `json:"pruned"`
	Uncommitted    int64  `json:"uncommitted"`
	Failure        string `json:"failure,omitempty"` // integrity, schema, signature or io
	Error          string `json:"error,omitempty"`
	ExitCode       int    `json:"exit_code"`
}

func runVerify(out io.Writer, args []string, key string, asJSON bool) error {
	start := time.Now()
	pr := startProgress("verify")
	rep, err := verify(args, key, pr.fn())
	pr.done()
	if asJSON {
		res := verifyResult{}
		if rep != nil {
			res = verifyResult{Source: rep.Source, Records: rep.Records, TreeSize: rep.TreeSize, Root: rep.Root, KeyID: rep.KeyID,
				KeySource: rep.KeySource, Complete: rep.Complete, Blobs: rep.Blobs, Pruned: rep.Pruned, Uncommitted: rep.Uncommitted}
		}
		if err != nil {
			res.Error, res.ExitCode = err.Error(), exitError
			if k := evidence.KindOf(err); k != 0 {
				res.Failure, res.ExitCode = k.String(), verifyExit(k)
			}
			var ce *cliError
			if errors.As(err, &ce) {
				res.ExitCode = ce.code
			}
		} else {
			res.OK, res.OriginVerified = true, rep.KeySource != "bundle"
			if !res.OriginVerified {
				res.ExitCode = exitUnpinned
			}
		}
		b, _ := json.Marshal(res)
		writeJSONBytes(out, b)
		if err == nil && !res.OriginVerified {
			return &exitOnly{code: exitUnpinned}
		}
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "verified %s: %d records, tree size %d, root %s, key %s (%s)\n",
		rep.Source, rep.Records, rep.TreeSize, rep.Root, rep.KeyID, rep.KeySource)
	if gopts.verbose {
		fmt.Fprintf(out, "  %d record bytes hashed; %d parent records proven by id; %d blobs checked, %d pruned by aerfs gc; %d index entries past the checkpoint; took %s\n",
			rep.Bytes, rep.Refs, rep.Blobs, rep.Pruned, rep.Uncommitted, time.Since(start).Round(time.Millisecond))
	}
	if rep.KeySource == "bundle" {
		fmt.Fprintf(out, "ORIGIN NOT VERIFIED: the bundle was checked against the key it carries, which proves it is consistent, not who made it.\n")
		return fail(exitUnpinned, "pass the key you trust: aerfs verify --key @aerfs.pub "+args[0]+" (aerfs key prints it on the machine that made the bundle)",
			"%s: integrity verified, origin not verified (no --key)", args[0])
	}
	return nil
}

// verify checks a bundle (args[0]) or the live log, against key when given.
func verify(args []string, key string, p evidence.Progress) (*evidence.Report, error) {
	if strings.HasPrefix(key, "@") {
		if fi, err := os.Stat(key[1:]); err == nil && !fi.Mode().IsRegular() {
			return nil, fail(exitIO, "name the file holding the public key", "cannot read key: %s is not a regular file", key[1:])
		}
		b, err := os.ReadFile(key[1:])
		if err != nil {
			return nil, fail(exitIO, "", "cannot read key: %v", err)
		}
		key = strings.TrimSpace(string(b))
	}
	if len(args) == 1 {
		return evidence.VerifyBundleProgress(args[0], key, evidence.DefaultLimits, p)
	}
	t, err := findTarget(false)
	if err != nil {
		return nil, err
	}
	syncLog(t.stateDir)
	return evidence.VerifyStateProgress(t.stateDir, key, p)
}

func newProveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "prove RECORD",
		Short: "Print the inclusion proof of a record (its id or its index) against the latest checkpoint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			var p *evidence.InclusionProof
			if idx, perr := strconv.ParseInt(args[0], 10, 64); perr == nil && len(args[0]) < 20 {
				p, err = evidence.Prove(t.stateDir, idx)
			} else {
				p, err = evidence.ProveID(t.stateDir, args[0])
			}
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), p)
		},
	}
}
