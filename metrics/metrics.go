// Package metrics exposes what the daemon decides and records as Prometheus
// metrics (`aerfs mount --metrics-addr`). It learns almost everything from
// the evidence records the daemon appends — a verdict, a commit, a
// quarantine, a taint — so that the numbers and the log cannot disagree;
// the rest (live sessions, the log's health) is asked for when scraped.
package metrics

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aerfs/aerfs/evidence"
)

// Metrics is one daemon's registry.
type Metrics struct {
	reg *prometheus.Registry

	verdicts    *prometheus.CounterVec // by verdict, rule, principal
	refusals    *prometheus.CounterVec // by rule, principal
	commits     *prometheus.CounterVec // guarded changes recorded, by type (write, rename, delete)
	commitTime  prometheus.Histogram   // a guarded commit, from its decision to its durable record
	quarantined prometheus.Counter
	pending     prometheus.Gauge
	taint       *prometheus.CounterVec // by flag
	sessions    prometheus.Counter     // session registrations
	appendErrs  prometheus.Counter
	netConns    *prometheus.CounterVec // connections through the sessions' proxies, by channel, verdict, rule
	netBytes    *prometheus.CounterVec // their bytes, by channel and direction
}

// Probes are asked at each scrape.
type Probes struct {
	// Version is the aerfs version serving the mount (aerfs_build_info).
	Version      string
	LiveSessions func() int
	LogHealthy   func() bool
}

// New makes the registry: aerfs's metrics, the Go runtime's and the
// process's (resident memory, descriptors).
func New(p Probes) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "aerfs", Name: name, Help: help}, labels)
	}
	m.verdicts = f("verdicts_total", "Decisions recorded, by verdict, rule and principal.", "verdict", "rule", "principal")
	m.refusals = f("refusals_total", "Refusals recorded (every deny verdict and refused content kept in quarantine), by rule and principal.", "rule", "principal")
	m.commits = f("guarded_changes_total", "Guarded changes recorded, by record type (write, rename, delete, restore, approve, ...).", "type")
	m.taint = f("taint_events_total", "Taint raised on a session or process, by flag.", "flag")
	m.netConns = f("net_connections_total", "Connections sessions asked their proxy for, by the host's channel, the verdict and the rule.", "channel", "verdict", "rule")
	m.netBytes = f("net_bytes_total", "Bytes relayed by the sessions' proxies, by the host's channel and direction (sent: to the host; received: from it).", "channel", "direction")
	m.commitTime = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "aerfs", Name: "guarded_commit_seconds",
		Help:    "Time of a guarded commit, from the decision to the durable record.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	m.quarantined = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "aerfs", Name: "quarantined_total", Help: "Refused content kept in quarantine."})
	m.pending = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "aerfs", Name: "pending_items", Help: "Quarantined content awaiting approve or reject (since the mount)."})
	m.sessions = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "aerfs", Name: "sessions_started_total", Help: "Sessions registered."})
	m.appendErrs = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "aerfs", Name: "evidence_append_errors_total", Help: "Records that could not be appended to the evidence log."})
	m.reg.MustRegister(m.verdicts, m.refusals, m.commits, m.taint, m.commitTime, m.quarantined, m.pending, m.sessions, m.appendErrs, m.netConns, m.netBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(buildInfo(p.Version))
	if p.LiveSessions != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "aerfs", Name: "sessions", Help: "Sessions known to the daemon."},
			func() float64 { return float64(p.LiveSessions()) }))
	}
	if p.LogHealthy != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "aerfs", Name: "evidence_log_healthy", Help: "1 when the evidence log accepts records, 0 when it fails (guarded changes are then refused)."},
			func() float64 {
				if p.LogHealthy() {
					return 1
				}
				return 0
			}))
	}
	return m
}

// buildInfo is the constant 1 labelled with what serves the mount: the
// aerfs version, the Go version and the go-fuse module version, as
// Prometheus's own *_build_info metrics are.
func buildInfo(version string) prometheus.Collector {
	gofuse := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/hanwen/go-fuse/v2" {
				gofuse = d.Version
			}
		}
	}
	if version == "" {
		version = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "aerfs", Name: "build_info",
		Help:        "Always 1; the labels say which aerfs, Go and go-fuse serve the mount.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "gofuse": gofuse}})
	g.Set(1)
	return g
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveCommit adds one guarded commit's duration.
func (m *Metrics) ObserveCommit(d time.Duration) { m.commitTime.Observe(d.Seconds()) }

// AppendFailed counts a record the log did not take.
func (m *Metrics) AppendFailed() { m.appendErrs.Inc() }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Observe counts what one record says.
func (m *Metrics) Observe(r *evidence.Record) {
	rule, principal := orNone(r.Meta.Rule), orNone(r.Principal)
	switch r.Type {
	case evidence.TypeVerdict:
		v := orNone(r.Meta.Verdict)
		m.verdicts.WithLabelValues(v, rule, principal).Inc()
		if v == "deny" {
			m.refusals.WithLabelValues(rule, principal).Inc()
		}
	case evidence.TypeQuarantine:
		m.quarantined.Inc()
		m.pending.Inc()
		m.refusals.WithLabelValues(rule, principal).Inc()
	case evidence.TypeApprove, evidence.TypeReject:
		m.pending.Dec()
		m.commits.WithLabelValues(r.Type).Inc()
	case evidence.TypeWrite, evidence.TypeRename, evidence.TypeDelete, evidence.TypeRestore, evidence.TypePromote:
		m.commits.WithLabelValues(r.Type).Inc()
	case evidence.TypeTaint:
		for _, t := range r.Taint {
			m.taint.WithLabelValues(strings.ToUpper(t)).Inc()
		}
	case evidence.TypeSessionStart:
		if r.Meta.Verdict != "deny" {
			m.sessions.Inc()
		}
	case evidence.TypeNet:
		if n := r.Payload; n != nil && n.Net != nil {
			v := orNone(r.Meta.Verdict)
			m.netConns.WithLabelValues(n.Net.Channel, v, rule).Inc()
			m.netBytes.WithLabelValues(n.Net.Channel, "sent").Add(float64(n.Net.Sent))
			m.netBytes.WithLabelValues(n.Net.Channel, "received").Add(float64(n.Net.Received))
			if v == "deny" {
				m.refusals.WithLabelValues(rule, principal).Inc()
			}
		}
	}
}
