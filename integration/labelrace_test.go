package integration

import (
	"testing"
)

// A file appended through several handles at once by one session, while
// the session reads it back, never reads as drift: the label's binding
// follows every close, whichever order the closes and the reads reach
// the daemon in. (An agent's transcript is written like this: Claude Code
// appends to its session's .jsonl from several writers at once; a close
// that bound the label to an older fingerprint than a close answered just
// before it, or a read decided on a stat taken before a close it raced,
// read the session's own file as changed behind aerfs's back, and the
// session was tainted UNTRUSTED.)
func TestConcurrentAppendsNeverReadAsDrift(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent})
	e.Mount()
	script := `
import os, threading
N = 60
def append(i):
    for j in range(N):
        fd = os.open("transcript.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (('{"w": %d, "n": %d}' % (i, j)) + "\n").encode())
        os.close(fd)
def read():
    for j in range(N):
        try:
            with open("transcript.jsonl", "rb") as f:
                f.read()
        except FileNotFoundError:
            pass
        os.stat("transcript.jsonl") if os.path.exists("transcript.jsonl") else None
ts = [threading.Thread(target=append, args=(i,)) for i in range(4)] + [threading.Thread(target=read) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
with open("MEMORY.md", "a") as f:
    f.write("- the transcript is kept\n")
`
	for round := 0; round < 3; round++ {
		r := runCmd(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--agent", "claude-code", "--principal", "USER",
			"--session", "ag", "--", "python3", "-c", script)
		if r.Code != 0 {
			bugErrorf(t, "round %d: the agent's run failed (exit %d): %s", round, r.Code, r.Stderr)
			break
		}
	}
	li := e.Log()
	for _, le := range li {
		if le.Record.Meta.Op == "drift" {
			bugErrorf(t, "the session's own appends read as drift: %s", describe([]LogEntry{le}))
		}
	}
	if n := refusals(li); n != 0 {
		bugErrorf(t, "the agent was refused %d times:%s", n, describe(li))
	}
}
