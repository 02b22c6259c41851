package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A foreground mount's log on the owner's terminal carries names sessions
// chose: no byte of them reaches the terminal raw.
func TestConsoleLogEscapes(t *testing.T) {
	t.Setenv("NO_COLOR", "1") // colours are the writer's own escapes
	var b bytes.Buffer
	log := zerolog.New(consoleLog(&b))
	hostile := "dir\x1b]0;owned\x07\x1b[2J\u202eevil\r"
	log.Warn().Str("path", hostile).Err(errors.New(hostile)).Msg("pid 7 has its working directory in " + hostile)
	out := b.String()
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\r"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q reached the terminal raw: %q", bad, out)
		}
	}
	if !strings.Contains(out, "working directory in dir") {
		t.Errorf("the message is lost: %q", out)
	}
}
