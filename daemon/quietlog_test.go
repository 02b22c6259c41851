package daemon

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A storm of the same error (every guarded change failing on a full disk)
// writes a few lines per period, not one per failure; the next line let
// through says how many were dropped; other messages and info lines pass.
func TestRepeatLimiterBoundsAStorm(t *testing.T) {
	var buf bytes.Buffer
	h := &RepeatLimiter{Burst: 3, Period: 50 * time.Millisecond}
	log := zerolog.New(&buf).Hook(h).With().Str("root", "x").Logger()
	for i := 0; i < 1000; i++ {
		log.Error().Int("i", i).Msg("guarded change refused")
		log.Info().Msg("committed")
	}
	log.Warn().Msg("another kind")
	out := buf.String()
	if n := strings.Count(out, "guarded change refused"); n != 3 {
		t.Fatalf("%d lines of the storm, want 3", n)
	}
	if n := strings.Count(out, "committed"); n != 1000 {
		t.Fatalf("%d info lines, want all 1000", n)
	}
	if !strings.Contains(out, "another kind") {
		t.Fatal("a different warning was dropped")
	}
	time.Sleep(60 * time.Millisecond)
	buf.Reset()
	log.Error().Msg("guarded change refused")
	if !strings.Contains(buf.String(), `"repeated":997`) {
		t.Fatalf("the first line of the next period does not count the dropped ones: %s", buf.String())
	}
}
