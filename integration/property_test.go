package integration

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Random sequences of operations (write, append, rename, link, symlink,
// copy, exec, interpreter read, restore) by random sessions, WEB and
// clean, on a real mount. After every step: no guarded file holds
// WEB-derived bytes under a clean label, and no WEB-derived program ever
// ran. AERFS_PROPERTY_STEPS sets the length (default 60, a few seconds of
// make test) and AERFS_PROPERTY_SEED the seed (default: the time, logged).
func TestPropertyLabelsFollowRandomOperations(t *testing.T) {
	steps := 60
	if s, err := strconv.Atoi(os.Getenv("AERFS_PROPERTY_STEPS")); err == nil && s > 0 {
		steps = s
	}
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("AERFS_PROPERTY_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d, %d steps (AERFS_PROPERTY_SEED=%d reproduces)", seed, steps, seed)
	rng := rand.New(rand.NewSource(seed))

	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent, "skills/tool.sh": "#!/bin/sh\necho clean tool\n",
		"notes/a.txt": "clean note\n"}).Mount()
	ran := t.TempDir()
	os.Chmod(ran, 0o777)
	// A WEB-derived program says so when it runs; a clean one does not.
	webProg := fmt.Sprintf("#!/bin/sh\n# WEBMARK\ntouch %s/web-ran\n", ran)
	plain := []string{"notes/a.txt", "notes/b.txt", "notes/c.sh"}
	guarded := []string{"MEMORY.md", "skills/tool.sh", "skills/new.sh"}
	all := append(append([]string{}, plain...), guarded...)
	pick := func(xs []string) string { return xs[rng.Intn(len(xs))] }
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

	type op struct {
		name string
		sh   func() string
	}
	ops := []op{
		{"write", func() string { return "printf %s " + q(webProg) + " > " + pick(all) }},
		{"append", func() string { return "cat " + pick(all) + " >> " + pick(all) }},
		{"rename", func() string { return "mv " + pick(all) + " " + pick(all) }},
		{"link", func() string { return "ln " + pick(all) + " " + pick(all) }},
		{"symlink", func() string { return "ln -s ../" + pick(all) + " " + pick(all) }},
		{"copy", func() string { return "cp " + pick(all) + " " + pick(all) }},
		{"exec", func() string { f := pick(all); return "chmod +x " + f + "; ./" + f }},
		{"interpret", func() string { return "sh " + pick(all) }},
		{"source", func() string { return ". ./" + pick(all) }},
	}
	sessions := []struct{ principal, session string }{{"WEB", "web1"}, {"WEB", "web2"}, {"USER", "u1"}, {"USER", "u2"}, {"USER", "u3"}}
	var trail []string
	for i := 0; i < steps; i++ {
		var step string
		if rng.Intn(12) == 0 {
			// The owner restores a guarded file to its first version.
			f := pick(guarded)
			step = "owner: aerfs restore " + f + " --to 1 --yes"
			e.Aerfs("restore", f, "--to", "1", "--yes", "--workspace", e.WS)
		} else {
			s := sessions[rng.Intn(len(sessions))]
			o := ops[rng.Intn(len(ops))]
			script := o.sh()
			if s.principal != "WEB" && o.name == "write" {
				script = strings.Replace(script, "WEBMARK", "clean", 1)
				script = strings.Replace(script, "touch "+ran+"/web-ran", "true", 1)
			}
			step = s.principal + "/" + s.session + " " + o.name + ": " + script
			e.ShT(s.principal, s.session, script+" >/dev/null 2>&1")
		}
		trail = append(trail, step)
		if _, err := os.Stat(filepath.Join(ran, "web-ran")); err == nil {
			t.Fatalf("AERFS BUG: a WEB-derived program ran (seed %d):\n  %s", seed, strings.Join(trail, "\n  "))
		}
		for _, f := range guarded {
			b, err := os.ReadFile(filepath.Join(e.WS, f))
			if err != nil || !strings.Contains(string(b), "WEBMARK") {
				continue
			}
			w := e.Aerfs("why", f, "--workspace", e.WS)
			if !strings.Contains(w.Stdout, "WEB_DERIVED") && !strings.Contains(w.Stdout, "UNTRUSTED") {
				t.Fatalf("AERFS BUG: %s holds WEB-derived bytes under a clean label (seed %d):\n%s\nsteps:\n  %s", f, seed, w.Stdout, strings.Join(trail, "\n  "))
			}
		}
	}
}
