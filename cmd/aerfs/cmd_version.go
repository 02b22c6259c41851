package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"golang.org/x/sys/unix"
)

// version and revision are set at build time by make (-X main.version=...,
// -X main.revision=...); a plain go build falls back to what the Go
// toolchain recorded.
var version, revision = "", ""

// versionInfo is what `aerfs version` reports.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	GoFUSE   string `json:"go_fuse"`
	Kernel   string `json:"kernel"`
	Platform string `json:"platform"`
	// Of the mount the current directory (or --workspace) is in, if any:
	// the daemon's version and the FUSE protocol the kernel offered it.
	Daemon       string `json:"daemon,omitempty"`
	FUSEProtocol string `json:"fuse_protocol,omitempty"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, Revision: revision, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, GoFUSE: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/hanwen/go-fuse/v2" {
				v.GoFUSE = d.Version
				if d.Replace != nil {
					v.GoFUSE = d.Replace.Version + " (replaced)"
				}
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Revision == "" {
					v.Revision = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" || v.Version == "(devel)" {
		v.Version = "devel"
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		v.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return v
}

func (v versionInfo) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "aerfs %s", v.Version)
	if v.Revision != "" {
		fmt.Fprintf(&b, " (%s", v.Revision)
		if v.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, "\n  go       %s %s\n  go-fuse  %s\n  kernel   %s\n", v.Go, v.Platform, v.GoFUSE, v.Kernel)
	if v.FUSEProtocol != "" {
		fmt.Fprintf(&b, "  mount    served by aerfs %s, kernel FUSE protocol %s\n", v.Daemon, v.FUSEProtocol)
	}
	return b.String()
}

func newVersionCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print aerfs's version, its Go and go-fuse versions and the kernel's",
		Example: `  aerfs version
  aerfs version --json | jq -r .revision
  aerfs --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return printVersion(os.Stdout, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func printVersion(w io.Writer, asJSON bool) error {
	v := buildVersion()
	// The mount this is run in (or --workspace), if a daemon answers.
	if t, err := findTarget(true); err == nil {
		if resp, err := daemon.Call(t.stateDir, daemon.Request{Op: "status"}); err == nil && resp.OK {
			var st daemon.Status
			if json.Unmarshal(resp.Data, &st) == nil {
				v.Daemon, v.FUSEProtocol = st.Version, st.FUSEProtocol
			}
		}
	}
	if asJSON {
		b, _ := json.Marshal(v)
		_, err := fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := io.WriteString(w, v.String())
	return err
}
