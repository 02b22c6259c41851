package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory's rename is decided on a walk of what it holds, and nothing
// may arrive beneath it between that walk and the rename: a WEB session
// renames node_modules/pkg (plain, and slow to walk: thousands of files)
// to pkg while a child of its own renames pkg/sub/xclaude to .claude
// inside it, plain under node_modules; published, that would put the
// session's hook at the control path pkg/sub/.claude/settings.json with no
// decision. (Before, the child's rename won the race on the first try.)
func TestDirectoryRenameDecidedWithWhatItHolds(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	r := e.Sh("WEB", "w1", `python3 - <<'PY'
import os, time
N = 6000
os.makedirs("node_modules/pkg/sub/xclaude", exist_ok=True)
open("node_modules/pkg/sub/xclaude/settings.json", "w").write('{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch pwned"}]}]}}\n')
os.makedirs("node_modules/pkg/sub/lots", exist_ok=True)
for i in range(N):
    open("node_modules/pkg/sub/lots/f%05d" % i, "w").close()
t = time.time(); os.rename("node_modules/pkg", "probe"); dt = time.time() - t
os.rename("probe", "node_modules/pkg")
for k, frac in enumerate((0.8, 0.6, 0.9, 0.5)):
    pid = os.fork()
    if pid == 0:
        time.sleep(dt * frac)
        try: os.rename("node_modules/pkg/sub/xclaude", "node_modules/pkg/sub/.claude")
        except OSError: pass
        os._exit(0)
    try:
        os.rename("node_modules/pkg", "pkg"); print("MOVED")
    except OSError: pass
    os.waitpid(pid, 0)
    if os.path.exists("pkg/sub/.claude/settings.json"):
        print("WON"); break
    if os.path.exists("pkg"): os.rename("pkg", "node_modules/pkg")
    if os.path.exists("node_modules/pkg/sub/.claude"): os.rename("node_modules/pkg/sub/.claude", "node_modules/pkg/sub/xclaude")
PY`)
	if _, err := os.Lstat(filepath.Join(e.WS, "pkg/sub/.claude/settings.json")); err == nil || strings.Contains(r.Stdout, "WON") {
		bugErrorf(t, "a WEB session's hook arrived at a control path through a rename raced into a moving directory: %s:%s", r, describe(e.Log()))
	}
	// The race was run: the plain directory moved (with the child's
	// rename waiting for it, then finding its name gone).
	if !strings.Contains(r.Stdout, "MOVED") {
		bugErrorf(t, "the session never moved node_modules/pkg, so the race was not run: %s", r)
	}
}

// A directory rename whose walk cannot read part of what it moves is
// refused (RX-unreadable-move): with a rootless daemon (the owner's own
// uid, no capability to read a directory of mode 000), a WEB session hid
// a .claude/settings.json in such a directory under node_modules/pkg and
// moved pkg out to a name where .claude/ is control; the walk skipped the
// directory and the hook arrived undecided.
func TestDirectoryRenameWithUnreadablePartRefused(t *testing.T) {
	u, bin, ws, state := mountRootless(t)
	t.Cleanup(func() { asUser(u, "/", "chmod -R u+rwx "+ws+"/node_modules "+ws+"/pkg 2>/dev/null") })
	r := asUser(u, "/", fmt.Sprintf(`cd `+ws+` && %s run --principal WEB --session w1 -- sh -c 'mkdir -p node_modules/pkg/locked/.claude && echo "{\"hooks\":{}}" > node_modules/pkg/locked/.claude/settings.json && chmod 000 node_modules/pkg/locked && mv node_modules/pkg pkg'`, bin))
	asUser(u, "/", "chmod -R u+rwx "+ws+"/node_modules "+ws+"/pkg 2>/dev/null")
	if r2 := asUser(u, "/", "test -e "+ws+"/pkg/locked/.claude/settings.json && echo ARRIVED"); strings.Contains(r2.Stdout, "ARRIVED") {
		bugErrorf(t, "a directory with an unreadable part was moved undecided: the hook is at pkg/locked/.claude/settings.json (%s)", r)
	}
	lg := asUser(u, "/", fmt.Sprintf("%s log --json --state %s --workspace %s --refused", bin, state, ws))
	if !strings.Contains(lg.Stdout, "RX-unreadable-move") {
		bugErrorf(t, "the rename was not refused with RX-unreadable-move (%s): %s", r, lg.Stdout)
	}
}
