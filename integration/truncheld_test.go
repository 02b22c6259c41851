package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A plain file cut to nothing by a clean writer (O_TRUNC) holds only what
// that writer writes — unless another handle is still open for writing:
// an untrusted session that opened the owner's script before the owner's
// rewrite writes through its old descriptor afterwards. The label must
// keep its origin, so that the owner's interpreter refuses to run it
// (before, the truncating open dropped the label: the owner's `sh
// deploy.sh` ran the WEB session's code outside every session).
func TestTruncatingOpenKeepsLabelWhileAnotherWriterHoldsTheFile(t *testing.T) {
	e := newEnv(t, map[string]string{"deploy.sh": "#!/bin/sh\necho deploying\n"}).Mount()
	ws := e.WS
	done := make(chan Result, 1)
	go func() {
		done <- e.Sh("WEB", "web", `python3 -c '
import os, time
fd = os.open("deploy.sh", os.O_RDWR)
open("opened", "w").close()
while not os.path.exists("go"): time.sleep(0.02)
os.pwrite(fd, b"#!/bin/sh\ntouch pwned #", 0)
open("written", "w").close()
while not os.path.exists("end"): time.sleep(0.02)
'`)
	}()
	wait := func(name string) {
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(filepath.Join(ws, name)); err == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("the WEB session did not get to %s", name)
	}
	wait("opened")
	expectOK(t, "the owner rewrites the script", e.Owner(`printf '#!/bin/sh\necho deploying v2   \n' > deploy.sh; touch go`))
	wait("written")
	r := e.Owner("sh deploy.sh")
	os.WriteFile(filepath.Join(ws, "end"), nil, 0o644)
	<-done
	if _, err := os.Stat(filepath.Join(ws, "pwned")); err == nil {
		bugErrorf(t, "the owner's sh ran what the WEB session wrote after the owner's truncating rewrite (%s):%s", r, describe(e.Log()))
	}
	if d := e.Denials("deploy.sh"); !hasRule(d, "AU3-exec-none") {
		bugErrorf(t, "the owner's sh of deploy.sh was not refused with AU3-exec-none:%s", describe(d))
	}
}
