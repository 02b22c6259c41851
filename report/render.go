package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/aerfs/aerfs/snapshot"
)

// Options choose what the page shows.
type Options struct {
	// Source is the provenance source: a workspace path or a record id
	// (prefix). "" picks the source with the largest contamination scope.
	Source string
	// Now is the time printed as the page's creation time.
	Now time.Time
	// Version is the aerfs version that made the page.
	Version string
	// Recent is how many of the newest records, refusals and guarded
	// changes are shown in full (0: DefaultRecent); everything is
	// counted whatever it is.
	Recent int
}

type page struct {
	Trust    Trust
	Manifest string
	Records  int
	Created  string
	Version  string
	Timeline Timeline
	Groups   []RefusalGroup
	Refusals []Refusal
	// RefusalsBefore is how many refusals older than those shown there are.
	RefusalsBefore int
	Agg            Aggregates
	Events         []Event
	EventsBefore   int
	ChangesTotal   int
	ChangesHidden  int
	Recent         int
	Graph          *Graph
	NoSource       string
	Changes        []Change
	Allowed        int
	Denied         int
	Held           int
	Sessions       int
	Filtered       string
	Net            []NetRow
	NetMore        int
}

// Render writes the report page of a verified bundle to w.
func Render(w io.Writer, b *Bundle, t Trust, o Options) error {
	x := index(b)
	if o.Recent <= 0 {
		o.Recent = DefaultRecent
	}
	all := changes(b, x)
	p := page{Trust: t, Records: len(b.Entries), Version: o.Version, Timeline: timeline(b),
		Groups: refusalGroups(b), Agg: aggregate(b), Recent: o.Recent, ChangesTotal: len(all)}
	p.Refusals, p.RefusalsBefore = refusals(b, o.Recent)
	p.Events, p.EventsBefore = recent(b, o.Recent)
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	p.Created = fmtTime(o.Now)
	sessions := map[string]bool{}
	for _, e := range b.Entries {
		switch markKind(e.Rec) {
		case "allow":
			p.Allowed++
		case "deny":
			p.Denied += weight(e.Rec)
		case "quarantine":
			p.Held++
		}
		if e.Rec.Meta.Session != "" {
			sessions[e.Rec.Meta.Session] = true
		}
	}
	p.Sessions = len(sessions)
	p.Net, p.NetMore = network(b)
	if f := b.Manifest.Filter; !b.Manifest.Complete {
		var parts []string
		for _, kv := range [][2]string{{"since", f.Since}, {"session", f.Session}, {"path", f.Path}, {"type", f.Type}} {
			if kv[1] != "" {
				parts = append(parts, kv[0]+" "+Printable(kv[1]))
			}
		}
		p.Filtered = strings.Join(parts, ", ")
		if p.Filtered == "" {
			p.Filtered = "a selection"
		}
	}
	src := strings.TrimSuffix(strings.TrimPrefix(o.Source, "./"), "/")
	var picked *snapshot.Scope
	if src == "" {
		src, picked = pickSource(b, x)
	}
	if src == "" {
		p.NoSource = "No file was written with a taint in this bundle, so there is no source to follow. Choose one with --source PATH."
	} else {
		sc, err := picked, error(nil)
		if sc == nil {
			sc, err = x.Scope(src)
		}
		if err != nil {
			if o.Source != "" {
				return fmt.Errorf("report: --source %s: %v", o.Source, err)
			}
			p.NoSource = "The source " + Printable(src) + " has no scope: " + err.Error()
		} else {
			changeOf := map[int64]string{}
			for _, c := range all {
				if _, ok := changeOf[c.Idx]; !ok {
					changeOf[c.Idx] = "#" + c.Anchor
				}
			}
			g := graph(b, x, sc, changeOf)
			p.Graph = &g
		}
	}
	// The diffs shown: the newest, and every one the graph links to.
	linked := map[string]bool{}
	if p.Graph != nil {
		for _, n := range p.Graph.Nodes {
			linked[strings.TrimPrefix(n.Href, "#")] = true
		}
		for _, f := range p.Graph.Files {
			linked[strings.TrimPrefix(f.Href, "#")] = true
		}
	}
	p.Changes, p.ChangesHidden = shownChanges(b, all, o.Recent, linked)
	return pageTmpl.Execute(w, p)
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"add": func(a, b int) int { return a + b },
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="referrer" content="no-referrer">
<title>aerfs evidence report — {{.Trust.Origin}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d2b3a;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px}
header .sub{color:#c6d2de;font-size:13px}
main{padding:8px 28px 40px;max-width:1400px}
section{background:#fff;border:1px solid #dde2e8;border-radius:6px;margin:18px 0;padding:14px 18px}
h2{font-size:17px;margin:0 0 10px}
.trust{border-left:6px solid #2e7d32}
.trust.unpinned{border-left-color:#c62828}
.warn{color:#b71c1c;font-weight:600}
.ok{color:#2e7d32;font-weight:600}
code,.mono,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:12px}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #e5e8ec;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
.kv th{width:190px;background:none}
.stats span{display:inline-block;margin-right:22px}
.scroll{overflow:auto}
.legend span{margin-right:16px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;vertical-align:-1px;margin-right:4px}
.allow{fill:#2e7d32}.sw.allow{background:#2e7d32}
.deny{fill:#c62828}.sw.deny{background:#c62828}
.quarantine{fill:#ef8f00}.sw.quarantine{background:#ef8f00}
.event{fill:#8a96a3}.sw.event{background:#8a96a3}
.lane{fill:#f3f5f8}.lanebar{stroke:#b5c0cc;stroke-width:6;stroke-linecap:round}
.lanelabel{font-size:12px;fill:#2b3440}
.axis{stroke:#5b6672}.tick{stroke:#cfd6de}.ticklabel{font-size:11px;fill:#5b6672}
.node rect{fill:#eef2f7;stroke:#7d8b99;stroke-width:1.2}
.node.root rect{fill:#fff4e0;stroke:#ef8f00;stroke-width:2.5}
.node.change rect{fill:#fde7e7;stroke:#c62828;stroke-width:2}
.node.refused rect{fill:#fff;stroke:#c62828;stroke-dasharray:5 3}
.node text{font-size:12px;fill:#1d232a}
.node .t1{font-weight:600}
.node .t3{fill:#5b6672;font-size:11px}
.edge{fill:none;stroke:#5b6672;stroke-width:1.5}
.edge.parent{stroke:#9aa6b2;stroke-dasharray:2 3}
.edge.refused{stroke:#c62828;stroke-dasharray:5 3}
.kind-deny{color:#c62828;font-weight:600}.kind-quarantine{color:#b26a00;font-weight:600}
.diff{border:1px solid #e0e4e9;border-radius:4px;margin:10px 0}
.diff h3{font-size:13px;margin:0;padding:6px 10px;background:#f0f2f5;font-weight:600}
.diff pre{margin:0;padding:6px 10px;overflow:auto;white-space:pre}
.diff .add{background:#e6f4ea;color:#14532d;display:block}
.diff .del{background:#fdecea;color:#7f1d1d;display:block}
.diff .hunk{color:#6b21a8;display:block}
.diff .hdr{color:#5b6672;display:block}
.diff .ctx{display:block}
.note{color:#5b6672;font-style:italic}
.nw,td.mono{white-space:nowrap}
</style>
</head>
<body>
<header>
<h1>aerfs evidence report</h1>
<div class="sub">origin <code>{{.Trust.Origin}}</code> · {{.Records}} records · made {{.Created}} UTC{{if .Version}} by aerfs {{.Version}}{{end}}</div>
</header>
<main>
<section id="trust" class="trust{{if not .Trust.Pinned}} unpinned{{end}}">
<h2>Verification</h2>
{{if .Trust.StateKey}}<p class="ok">Verified with the state directory's key, as aerfs verify --state does: integrity verified, and the checkpoint is signed by the key of the state directory this log was read from (fingerprint below, the one <code>aerfs key</code> prints). Whoever receives this page checks its origin with <code>aerfs report BUNDLE --key</code> and the key they hold.</p>
{{else if .Trust.Pinned}}<p class="ok">Verified with a key you gave (--key): integrity and origin verified.</p>
{{else}}<p class="warn">Integrity verified, origin not verified: the checkpoint was checked against {{.Trust.KeySource}}, which anyone who made the bundle could have replaced. Pin the key with --key to verify its origin.</p>{{end}}
<table class="kv">
<tr><th>source</th><td><code>{{.Trust.Source}}</code></td></tr>
<tr><th>verified with</th><td>{{.Trust.KeySource}}</td></tr>
<tr><th>key</th><td><code>{{.Trust.PublicKey}}</code></td></tr>
<tr><th>key id</th><td><code>{{.Trust.KeyID}}</code></td></tr>
<tr><th>key fingerprint (SHA-256)</th><td><code>{{.Trust.Fingerprint}}</code></td></tr>
<tr><th>tree size · root</th><td><code>{{.Trust.TreeSize}} · {{.Trust.Root}}</code></td></tr>
<tr><th>coverage</th><td>{{if .Trust.Complete}}every record of the log{{else}}a partial bundle ({{.Filtered}}): {{.Records}} of {{.Trust.TreeSize}} records{{end}}</td></tr>
</table>
</section>

<section id="summary">
<h2>Summary</h2>
<p class="stats"><span><b>{{.Sessions}}</b> sessions</span><span><b>{{.Allowed}}</b> allowed</span><span class="kind-deny"><b>{{.Denied}}</b> refused</span><span class="kind-quarantine"><b>{{.Held}}</b> quarantined</span><span><b>{{.ChangesTotal}}</b> guarded changes</span></p>
<p class="note">Every record of the bundle is counted in this summary, the tables below it and the timeline; the newest {{.Recent}} records, refusals and guarded changes are shown in full further down (<code>aerfs report --recent N</code> shows more), and <code>aerfs log</code> lists every record.</p>
</section>



<section id="timeline">
<h2>Timeline of sessions and verdicts</h2>
<p class="legend"><span><i class="sw allow"></i>allowed</span><span><i class="sw deny"></i>refused</span><span><i class="sw quarantine"></i>quarantined</span><span><i class="sw event"></i>other record</span> <span class="note">{{.Timeline.From}} → {{.Timeline.To}} UTC; a mark is the records of its lane in a column a few pixels wide, coloured by the most serious among them; hover it for what it holds</span></p>
<div class="scroll">
<svg id="timeline-svg" width="{{.Timeline.Width}}" height="{{.Timeline.Height}}" viewBox="0 0 {{.Timeline.Width}} {{.Timeline.Height}}" role="img" aria-label="timeline">
{{range .Timeline.Lanes}}{{if .Stripe}}<rect class="lane" x="0" y="{{add .Y -14}}" width="{{$.Timeline.Width}}" height="28"></rect>{{end}}
<text class="lanelabel" x="8" y="{{.TextY}}">{{.Label}}</text>
<line class="lanebar" x1="{{.BarX1}}" y1="{{.Y}}" x2="{{.BarX2}}" y2="{{.Y}}"></line>
{{end}}
{{range .Timeline.Ticks}}<line class="tick" x1="{{.X}}" y1="24" x2="{{.X}}" y2="{{$.Timeline.AxisY}}"></line>
<text class="ticklabel" x="{{.X}}" y="{{add $.Timeline.AxisY 18}}" text-anchor="middle">{{.Label}}</text>
{{end}}
<line class="axis" x1="{{.Timeline.PlotX}}" y1="{{.Timeline.AxisY}}" x2="{{add .Timeline.PlotX .Timeline.PlotW}}" y2="{{.Timeline.AxisY}}"></line>
{{range .Timeline.Marks}}{{if eq .Kind "deny"}}<rect class="mark deny" x="{{add .X -6}}" y="{{add .Y -6}}" width="12" height="12"><title>{{.Title}}</title></rect>
{{else if eq .Kind "quarantine"}}<polygon class="mark quarantine" points="{{.Points}}"><title>{{.Title}}</title></polygon>
{{else if eq .Kind "allow"}}<circle class="mark allow" cx="{{.X}}" cy="{{.Y}}" r="5"><title>{{.Title}}</title></circle>
{{else}}<circle class="mark event" cx="{{.X}}" cy="{{.Y}}" r="3"><title>{{.Title}}</title></circle>
{{end}}{{end}}
</svg>
</div>
</section>

<section id="refusals">
<h2>Refusals by rule and principal</h2>
{{if .Groups}}<table id="refusal-table">
<tr><th>rule</th><th>principal</th><th>kind</th><th>count</th><th>paths</th><th>sessions</th><th>first</th><th>last</th><th>reason</th></tr>
{{range .Groups}}<tr class="refusal-row"><td class="nw"><code>{{.Rule}}</code></td><td>{{.Principal}}</td><td class="nw kind-{{.Kind}}">{{.Kind}}</td><td>{{.Count}}</td><td>{{range $i, $p := .Paths}}{{if $i}}, {{end}}<code>{{$p}}</code>{{end}}{{if .MorePaths}} and {{.MorePaths}} more{{end}}</td><td>{{range $i, $s := .Sessions}}{{if $i}}, {{end}}{{$s}}{{end}}</td><td class="mono">{{.First}}</td><td class="mono">{{.Last}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>
<details><summary>the newest {{len .Refusals}} refusals{{if .RefusalsBefore}} (and {{.RefusalsBefore}} earlier: aerfs log --refused){{end}}</summary>
<table id="refusal-list">
<tr><th>#</th><th>time</th><th>kind</th><th>rule</th><th>principal</th><th>session</th><th>op</th><th>path</th><th>taint</th><th>reason</th><th>record</th></tr>
{{range .Refusals}}<tr><td>{{.Idx}}</td><td class="mono">{{.Time}}</td><td class="kind-{{.Kind}}">{{.Kind}}{{if .Folded}} ×{{.Folded}}{{end}}</td><td><code>{{.Rule}}</code></td><td>{{.Principal}}</td><td>{{.Session}}</td><td>{{.Op}}</td><td><code>{{.Path}}</code></td><td>{{.Taint}}</td><td>{{.Reason}}</td><td><code>{{.ID}}</code></td></tr>
{{end}}</table></details>
{{else}}<p class="note">No request was refused or quarantined.</p>{{end}}
</section>

<section id="rules">
<h2>Rules</h2>
{{if .Agg.Rules}}<table id="rule-table">
<tr><th>rule</th><th>refused</th><th>quarantined</th><th>allowed</th></tr>
{{range .Agg.Rules}}<tr class="rule-row"><td class="nw"><code>{{.Rule}}</code></td><td{{if .Refused}} class="kind-deny"{{end}}>{{.Refused}}</td><td{{if .Quarantine}} class="kind-quarantine"{{end}}>{{.Quarantine}}</td><td>{{.Allowed}}</td></tr>
{{end}}</table>{{else}}<p class="note">No verdict names a rule.</p>{{end}}
</section>

<section id="sessions">
<h2>Sessions</h2>
<table id="session-table">
<tr><th>session</th><th>principal</th><th>records</th><th>allowed</th><th>refused</th><th>quarantined</th><th>guarded changes</th><th>first</th><th>last</th></tr>
{{range .Agg.Sessions}}{{template "sessrow" .}}{{end}}</table>
{{if .Agg.SessionsMore}}<details><summary>{{len .Agg.SessionsMore}} more sessions</summary><table>
{{range .Agg.SessionsMore}}{{template "sessrow" .}}{{end}}</table></details>{{end}}
{{define "sessrow"}}<tr class="session-row"><td>{{.Session}}</td><td>{{.Principal}}</td><td>{{.Records}}</td><td>{{.Allowed}}</td><td{{if .Refused}} class="kind-deny"{{end}}>{{.Refused}}</td><td{{if .Quarantined}} class="kind-quarantine"{{end}}>{{.Quarantined}}</td><td>{{.Changes}}</td><td class="mono">{{.First}}</td><td class="mono">{{.Last}}</td></tr>
{{end}}{{if .Agg.MoreSessions}}<p class="note">… and {{.Agg.MoreSessions}} more sessions with fewer refusals and records (aerfs session list --all).</p>{{end}}
</section>

<section id="paths">
<h2>Paths</h2>
<table id="path-table">
<tr><th>path</th><th>records</th><th>allowed</th><th>refused</th><th>quarantined</th><th>guarded changes</th><th>last</th></tr>
{{range .Agg.Paths}}{{template "pathrow" .}}{{end}}</table>
{{if .Agg.PathsMore}}<details><summary>{{len .Agg.PathsMore}} more paths</summary><table>
{{range .Agg.PathsMore}}{{template "pathrow" .}}{{end}}</table></details>{{end}}
{{define "pathrow"}}<tr class="path-row"><td><code>{{.Path}}</code></td><td>{{.Records}}</td><td>{{.Allowed}}</td><td{{if .Refused}} class="kind-deny"{{end}}>{{.Refused}}</td><td{{if .Quarantined}} class="kind-quarantine"{{end}}>{{.Quarantined}}</td><td>{{.Changes}}</td><td class="mono">{{.Last}}</td></tr>
{{end}}{{if .Agg.MorePaths}}<p class="note">… and {{.Agg.MorePaths}} more paths (aerfs log --path PATH).</p>{{end}}
</section>

<section id="recent">
<h2>The newest records</h2>
<p class="note">The newest {{len .Events}} of {{.Records}} records, newest first{{if .EventsBefore}}; the {{.EventsBefore}} before them are counted above and listed by aerfs log{{end}}.</p>
<table id="recent-table">
<tr><th>#</th><th>time</th><th>type</th><th>verdict</th><th>rule</th><th>principal</th><th>session</th><th>op</th><th>path</th><th>reason</th><th>record</th></tr>
{{range .Events}}<tr><td>{{.Idx}}</td><td class="mono">{{.Time}}</td><td>{{.Type}}</td><td class="kind-{{.Kind}}">{{.Verdict}}</td><td><code>{{.Rule}}</code></td><td>{{.Principal}}</td><td>{{.Session}}</td><td>{{.Op}}</td><td><code>{{.Path}}</code></td><td>{{.Reason}}</td><td><code>{{.ID}}</code></td></tr>
{{end}}</table>
</section>

<section id="network">
<h2>Network: what sessions reached through their proxy</h2>
{{if .Net}}<p class="note">Each row is one session and one host: the bytes a <code>web</code> host sent tainted its session before they reached it; <code>model</code> and <code>trusted</code> hosts did not taint.</p>
<table id="net-table">
<tr><th>session</th><th>host</th><th>channel</th><th>connections</th><th>refused</th><th>rules</th><th>sent</th><th>received</th><th>first</th><th>last</th></tr>
{{range .Net}}<tr><td>{{.Session}}</td><td><code>{{.Host}}</code></td><td>{{.Channel}}</td><td>{{.Conns}}</td><td{{if .Refused}} class="kind-deny"{{end}}>{{.Refused}}</td><td><code>{{.Rules}}</code></td><td>{{.Sent}}</td><td>{{.Received}}</td><td class="mono">{{.First}}</td><td class="mono">{{.Last}}</td></tr>
{{end}}</table>{{if .NetMore}}<p class="note">… and {{.NetMore}} more session–host pairs (aerfs log --type net).</p>{{end}}
{{else}}<p class="note">No connection through a session's proxy in this bundle.</p>{{end}}
</section>

<section id="provenance">
<h2>Provenance of {{if .Graph}}<code>{{.Graph.Source}}</code>{{else}}a source{{end}}</h2>
{{with .Graph}}<p>{{.Records}} records downstream of the source{{if .Refused}}, and {{.Refused}} refusal{{if ne .Refused 1}}s{{end}} of the sessions it reached (dashed){{end}}. Arrows point from a record to what descends from it; dotted arrows are further parents a record names. <span class="legend"><span><i class="sw" style="background:#fff4e0;border:2px solid #ef8f00"></i>the source's records</span><span><i class="sw" style="background:#fde7e7;border:2px solid #c62828"></i>a guarded change (click for its diff)</span><span><i class="sw" style="border:1px dashed #c62828"></i>refused</span></span></p>
<div class="scroll">
<svg id="provenance-svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="provenance graph">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#5b6672"></path></marker></defs>
{{range .Edges}}<path class="{{.Class}}" d="{{.D}}" marker-end="url(#arrow)"></path>
{{end}}
{{range .Nodes}}<g class="{{.Class}}">{{if .Href}}<a href="{{.Href}}">{{end}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" rx="6"></rect><text class="t1" x="{{.TX}}" y="{{.T1}}">{{.Line1}}</text><text class="t2" x="{{.TX}}" y="{{.T2}}">{{.Line2}}</text><text class="t3" x="{{.TX}}" y="{{.T3}}">{{.Line3}}</text><title>{{.Title}}</title>{{if .Href}}</a>{{end}}</g>
{{end}}
</svg>
</div>
{{if .Files}}<h3>Guarded files changed downstream</h3>
<table id="scope-files"><tr><th>path</th><th>first contaminated version</th><th>by</th><th>session</th><th>versions</th><th>content before</th></tr>
{{range .Files}}<tr><td><a href="{{.Href}}"><code>{{.Path}}</code></a></td><td>{{.FirstType}} <code>{{.FirstRecord}}</code></td><td>{{.Principal}}</td><td>{{.Session}}</td><td>{{.Versions}}</td><td><code>{{.Before}}</code></td></tr>
{{end}}</table>{{else}}<p class="note">No guarded file changed downstream of the source.</p>{{end}}
{{else}}<p class="note">{{.NoSource}}</p>{{end}}
</section>

<section id="changes">
<h2>Diffs of guarded changes</h2>
{{if .ChangesHidden}}<p class="note">The newest {{len .Changes}} of {{.ChangesTotal}} guarded changes (with every one the provenance graph links to); aerfs history PATH lists the versions of a file and aerfs diff PATH --from V --to W shows any of them.</p>{{end}}
{{range .Changes}}<div class="diff" id="{{.Anchor}}"><h3>#{{.Idx}} {{.Type}} <code>{{.Path}}</code> · {{.Principal}} · session {{.Session}}{{if .Rule}} · {{.Rule}}{{end}} · {{.Time}} UTC · record <code>{{.Record}}</code></h3>
{{if .Lines}}<pre>{{range .Lines}}<span class="{{.Class}}">{{.Text}}</span>{{end}}</pre>{{end}}{{if .Note}}<p class="note">&nbsp;{{.Note}}</p>{{end}}</div>
{{else}}<p class="note">No guarded file changed.</p>{{end}}
</section>
</main>
</body>
</html>
`
