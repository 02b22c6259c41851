package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// # OpenClaw's state in a confined session
//
// OpenClaw keeps its control data in its state directory (~/.openclaw):
// state/openclaw.sqlite holds the host's exec approval policy, paired
// devices and their tokens, channel allow lists, cron jobs and plugin
// binding approvals; agents/<id>/agent/ the login profiles and model
// providers. It writes the same databases on every run (its sessions'
// rows), so they can be neither writable to a session (a WEB session would
// rewrite the owner's approval policy, unrecorded) nor read-only (OpenClaw
// fails at start). A session of the openclaw agent gets a state directory
// of its own instead (OPENCLAW_STATE_DIR, in its private cache): a copy of
// the owner's state/ and agents/*/agent/ databases, taken at its start, so
// that the owner's approvals, logins and providers apply to it, and links
// to everything else of ~/.openclaw (openclaw.json, skills, the workspace,
// extensions …), where the mount and the confinement decide as before.
// What the session changes in its copy ends with it.

// openclawStateEnv makes the private state directory in cache and returns
// the environment naming it; nothing when the owner set
// OPENCLAW_STATE_DIR, or has no ~/.openclaw.
func openclawStateEnv(cache string) []string {
	if _, set := os.LookupEnv("OPENCLAW_STATE_DIR"); set {
		return nil
	}
	base := os.Getenv("OPENCLAW_HOME")
	if base == "" {
		base = os.Getenv("HOME")
	}
	owner := filepath.Join(base, ".openclaw")
	ents, err := os.ReadDir(owner)
	if err != nil || !filepath.IsAbs(owner) {
		return nil
	}
	dir := filepath.Join(cache, "openclaw-state")
	if os.Mkdir(dir, 0o700) != nil {
		return nil
	}
	for _, e := range ents {
		switch name := e.Name(); name {
		case "state":
			copyFiles(filepath.Join(owner, name), filepath.Join(dir, name))
		case "agents":
			ids, _ := os.ReadDir(filepath.Join(owner, name))
			for _, id := range ids {
				if id.IsDir() {
					copyFiles(filepath.Join(owner, name, id.Name(), "agent"), filepath.Join(dir, name, id.Name(), "agent"))
				}
			}
		default:
			os.Symlink(filepath.Join(owner, name), filepath.Join(dir, name))
		}
	}
	return []string{"OPENCLAW_STATE_DIR=" + dir}
}

// copyFiles copies the regular files of src (not its subdirectories)
// into dst, made 0700; a SQLite database's shared-memory index (-shm) is
// left behind: SQLite rebuilds it from the write-ahead log.
func copyFiles(src, dst string) {
	ents, err := os.ReadDir(src)
	if err != nil {
		return
	}
	if os.MkdirAll(dst, 0o700) != nil {
		return
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), "-shm") {
			continue
		}
		copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
}

func copyFile(src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		return
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	_, err = io.Copy(out, in)
	if out.Close() != nil || err != nil {
		os.Remove(dst)
	}
}
