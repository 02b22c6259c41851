package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/metrics"
)

// countingRecorder passes every record to the evidence log and, once the
// log has taken it, to the metrics (when they are served): the counters
// move exactly with the log. It also keeps the log's health for status.
type countingRecorder struct {
	ledger.Recorder
	m      *metrics.Metrics // nil without --metrics-addr
	health *logHealth
}

// logHealth is whether the last append succeeded, and the last error.
type logHealth struct {
	log     zerolog.Logger // says when the log starts failing and when it heals
	mu      sync.Mutex
	ok      bool
	lastErr string
	lastAt  time.Time
}

func (h *logHealth) note(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		if !h.ok {
			h.log.Info().Str("event", "log_health").Bool("healthy", true).Str("after", h.lastErr).Msg("the evidence log accepts records again")
		}
		h.ok = true
		return
	}
	if h.ok {
		h.log.Error().Str("event", "log_health").Bool("healthy", false).Err(err).Msg("the evidence log fails: guarded changes are refused until it heals")
	}
	h.ok, h.lastErr, h.lastAt = false, err.Error(), time.Now().UTC()
}

func (h *logHealth) state() (ok bool, lastErr string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ok, h.lastErr, h.lastAt
}

func (c *countingRecorder) Append(r *evidence.Record) (string, error) {
	id, err := c.Recorder.Append(r)
	c.after(r, err)
	return id, err
}

func (c *countingRecorder) AppendAll(rs ...*evidence.Record) ([]string, error) {
	ids, err := c.Recorder.AppendAll(rs...)
	for _, r := range rs {
		c.after(r, err)
	}
	return ids, err
}

func (c *countingRecorder) AppendAsync(r *evidence.Record, onErr func(error)) (string, error) {
	id, err := c.Recorder.AppendAsync(r, func(err error) {
		if c.m != nil {
			c.m.AppendFailed()
		}
		c.health.note(err)
		if onErr != nil {
			onErr(err)
		}
	})
	c.after(r, err)
	return id, err
}

func (c *countingRecorder) after(r *evidence.Record, err error) {
	c.health.note(err)
	if c.m == nil {
		return
	}
	if err != nil {
		c.m.AppendFailed()
		return
	}
	c.m.Observe(r)
}

// serveMetrics serves /metrics on addr until ctx ends. The listener is
// opened before the call returns, so a bad address fails the mount.
func serveMetrics(ctx context.Context, addr string, m *metrics.Metrics, log zerolog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), nil
}
