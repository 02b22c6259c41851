package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// # The timeline, bounded
//
// A log of a year holds hundreds of thousands of records and thousands of
// sessions; one SVG element per record made a page of tens of megabytes
// that a browser took a minute to open. The timeline is therefore drawn
// from counts: a lane for each principal acting outside sessions and for
// the sessions with the most refusals (then the most records), one lane
// for every other session, and the plot cut into columns a few pixels
// wide. Each (lane, column) cell that holds records is one mark, coloured
// by the most serious verdict in it (a refusal over a quarantine over an
// allowed request over any other record), whose tooltip says what it
// holds; a cell of one record shows that record. The page's size is then
// bounded by lanes × columns, whatever the log's.

// Timeline is the laid-out SVG timeline.
type Timeline struct {
	Width, Height int
	PlotX, PlotW  int
	AxisY         int
	Lanes         []Lane
	Ticks         []Tick
	Marks         []Mark
	From, To      string
	// Merged is how many sessions share the last lane.
	Merged int
}

// Lane is one row of the timeline.
type Lane struct {
	Y, TextY       int
	Label          string
	BarX1, BarX2   int
	Stripe         bool
	Allow, Refused int
}

// Tick is one label of the time axis.
type Tick struct {
	X     int
	Label string
}

// Mark is one cell of the timeline: the records of one lane in one column.
type Mark struct {
	X, Y   int
	Kind   string // allow, deny, quarantine, event: the most serious in the cell
	Points string // the diamond of a quarantine
	Title  string
}

const (
	maxLanes  = 40
	laneH     = 28
	labelW    = 250
	timelineW = 1200
	// columnW is the width of a timeline column in pixels: a mark is
	// about this wide, so finer columns would only overlap.
	columnW = 8
)

// laneStat is what the lane choice needs to know of a session or principal.
type laneStat struct {
	key, label     string
	first          time.Time
	records, refus int
}

// cell gathers the records of one lane in one column.
type cell struct {
	counts     [4]int // by markOrder
	rules      map[string]int
	first      *Entry
	from, to   time.Time
	worstEntry *Entry
}

func timeline(b *Bundle) Timeline {
	tl := Timeline{Width: timelineW, PlotX: labelW, PlotW: timelineW - labelW - 30}
	var t0, t1 time.Time
	stats := map[string]*laneStat{}
	var order []*laneStat
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Time.IsZero() {
			continue
		}
		if t0.IsZero() || e.Time.Before(t0) {
			t0 = e.Time
		}
		if e.Time.After(t1) {
			t1 = e.Time
		}
		k, label := laneKey(e.Rec)
		st := stats[k]
		if st == nil {
			st = &laneStat{key: k, label: label, first: e.Time}
			stats[k] = st
			order = append(order, st)
		}
		st.records++
		if isRefusal(e.Rec) {
			st.refus += weight(e.Rec)
		}
	}
	lanes := chooseLanes(order)
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Second
	}
	// A margin so the first and last marks are not on the edge.
	pad := span / 40
	t0, t1 = t0.Add(-pad), t1.Add(pad)
	span = t1.Sub(t0)
	xOf := func(t time.Time) int {
		return tl.PlotX + int(float64(t.Sub(t0))/float64(span)*float64(tl.PlotW))
	}
	laneOf := map[string]int{}
	top := 30
	for i, st := range lanes {
		y := top + i*laneH + laneH/2
		label := st.label
		if st.key == mergedLane {
			tl.Merged = st.records
			label = fmt.Sprintf("%d further sessions", len(order)-len(lanes)+1)
			st.records = 0
		}
		tl.Lanes = append(tl.Lanes, Lane{Y: y, TextY: y + 4, Label: clip(label, 34), BarX1: -1, Stripe: i%2 == 0})
		laneOf[st.key] = i
	}
	mergedAt, merging := laneOf[mergedLane]
	cols := tl.PlotW/columnW + 1
	cells := map[int]*cell{} // lane*cols + column
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Time.IsZero() {
			continue
		}
		k, _ := laneKey(e.Rec)
		li, ok := laneOf[k]
		if !ok && merging {
			li, ok = mergedAt, true
		}
		if !ok {
			continue
		}
		ln := &tl.Lanes[li]
		x := xOf(e.Time)
		if ln.BarX1 < 0 {
			ln.BarX1 = x
		}
		ln.BarX2 = x
		kind := markKind(e.Rec)
		switch kind {
		case "allow":
			ln.Allow++
		case "deny", "quarantine":
			ln.Refused += weight(e.Rec)
		}
		if e.Rec.Type == evidence.TypeSessionStart || e.Rec.Type == evidence.TypeSessionEnd {
			continue // the lane's bar shows them
		}
		col := (x - tl.PlotX) / columnW
		c := cells[li*cols+col]
		if c == nil {
			c = &cell{first: e, from: e.Time}
			cells[li*cols+col] = c
		}
		c.counts[markOrder(kind)] += weight(e.Rec)
		c.to = e.Time
		if c.worstEntry == nil || markOrder(kind) > markOrder(markKind(c.worstEntry.Rec)) {
			c.worstEntry = e
		}
		if kind == "deny" || kind == "quarantine" {
			if c.rules == nil {
				c.rules = map[string]int{}
			}
			c.rules[orDash(e.Rec.Meta.Rule)] += weight(e.Rec)
		}
	}
	keys := make([]int, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		c := cells[k]
		li, col := k/cols, k%cols
		y := tl.Lanes[li].Y
		x := tl.PlotX + col*columnW + columnW/2
		kind := markKind(c.worstEntry.Rec)
		m := Mark{X: x, Y: y, Kind: kind}
		if n := c.total(); n == 1 {
			m.X = xOf(c.first.Time)
			m.Title = markTitle(c.first)
		} else {
			m.Title = c.title(n)
		}
		if kind == "quarantine" {
			m.Points = fmt.Sprintf("%d,%d %d,%d %d,%d %d,%d", m.X, y-7, m.X+7, y, m.X, y+7, m.X-7, y)
		}
		tl.Marks = append(tl.Marks, m)
	}
	// Draw refusals over allows.
	sort.SliceStable(tl.Marks, func(i, j int) bool { return markOrder(tl.Marks[i].Kind) < markOrder(tl.Marks[j].Kind) })
	for i := range tl.Lanes {
		if tl.Lanes[i].BarX1 < 0 {
			tl.Lanes[i].BarX1 = tl.PlotX
			tl.Lanes[i].BarX2 = tl.PlotX
		}
	}
	tl.AxisY = top + len(tl.Lanes)*laneH + 6
	tl.Height = tl.AxisY + 40
	step := tickStep(span)
	layout := "15:04:05"
	if step < time.Second {
		layout = "15:04:05.000"
	}
	if span > 36*time.Hour {
		layout = "Jan 2 15:04"
	}
	for t := t0.Truncate(step).Add(step); !t.After(t1); t = t.Add(step) {
		tl.Ticks = append(tl.Ticks, Tick{X: xOf(t), Label: t.UTC().Format(layout)})
	}
	tl.From, tl.To = fmtTime(t0.Add(pad)), fmtTime(t1.Add(-pad))
	return tl
}

// mergedLane is the key of the lane every session without its own shares.
const mergedLane = "more"

// chooseLanes keeps a lane for every principal acting outside sessions
// and for the sessions with the most refusals, then the most records, up
// to maxLanes; the others share the last lane. Lanes are in order of
// their first record.
func chooseLanes(all []*laneStat) []*laneStat {
	if len(all) <= maxLanes {
		return all
	}
	ranked := append([]*laneStat(nil), all...)
	sort.SliceStable(ranked, func(i, j int) bool {
		a, b := ranked[i], ranked[j]
		if pa, pb := strings.HasPrefix(a.key, "p:"), strings.HasPrefix(b.key, "p:"); pa != pb {
			return pa
		}
		if a.refus != b.refus {
			return a.refus > b.refus
		}
		return a.records > b.records
	})
	keep := ranked[:maxLanes-1]
	sort.SliceStable(keep, func(i, j int) bool { return keep[i].first.Before(keep[j].first) })
	merged := &laneStat{key: mergedLane}
	for _, st := range ranked[maxLanes-1:] {
		merged.records += st.records
	}
	return append(keep, merged)
}

func (c *cell) total() int { return c.counts[0] + c.counts[1] + c.counts[2] + c.counts[3] }

// title says what a cell of several records holds.
func (c *cell) title(n int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d records, %s → %s", n, fmtTime(c.from), fmtTime(c.to))
	names := [4]string{"other", "allowed", "quarantined", "refused"}
	for _, i := range []int{3, 2, 1, 0} {
		if c.counts[i] > 0 {
			fmt.Fprintf(&sb, "\n%d %s", c.counts[i], names[i])
		}
	}
	if len(c.rules) > 0 {
		rules := make([]string, 0, len(c.rules))
		for r := range c.rules {
			rules = append(rules, r)
		}
		sort.Slice(rules, func(i, j int) bool {
			if c.rules[rules[i]] != c.rules[rules[j]] {
				return c.rules[rules[i]] > c.rules[rules[j]]
			}
			return rules[i] < rules[j]
		})
		var parts []string
		for i, r := range rules {
			if i == 4 {
				parts = append(parts, "…")
				break
			}
			parts = append(parts, Printable(r)+" "+strconv.Itoa(c.rules[r]))
		}
		fmt.Fprintf(&sb, "\nrules: %s", strings.Join(parts, ", "))
	}
	return sb.String()
}

func markOrder(k string) int {
	switch k {
	case "event":
		return 0
	case "allow":
		return 1
	case "quarantine":
		return 2
	}
	return 3
}
