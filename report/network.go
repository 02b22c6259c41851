package report

import (
	"net"
	"sort"
	"strconv"

	"github.com/aerfs/aerfs/evidence"
)

// NetRow is what one session did with one host through its proxy.
type NetRow struct {
	Session, Host, Channel string
	Conns, Refused         int
	Rules                  string // the rules that decided, in order of first use
	Sent, Received         int64
	First, Last            string
}

// maxNetRows bounds the network table; the log has every connection.
const maxNetRows = 500

// network groups the bundle's net records by session and host.
func network(b *Bundle) (rows []NetRow, more int) {
	type key struct{ session, host string }
	idx := map[key]int{}
	seenRule := map[key]map[string]bool{}
	for _, e := range b.Entries {
		r := e.Rec
		if r.Type != evidence.TypeNet || r.Payload == nil || r.Payload.Net == nil {
			continue
		}
		n := r.Payload.Net
		k := key{r.Meta.Session, net.JoinHostPort(n.Host, strconv.Itoa(n.Port))}
		i, ok := idx[k]
		if !ok {
			if len(rows) >= maxNetRows {
				more++
				continue
			}
			i = len(rows)
			idx[k] = i
			seenRule[k] = map[string]bool{}
			rows = append(rows, NetRow{Session: Printable(orDash(k.session)), Host: Printable(k.host), Channel: Printable(n.Channel), First: fmtTime(e.Time)})
		}
		row := &rows[i]
		if r.Meta.Verdict == "allow" {
			row.Conns++
		} else {
			row.Refused++
		}
		if rule := r.Meta.Rule; !seenRule[k][rule] {
			seenRule[k][rule] = true
			if row.Rules != "" {
				row.Rules += ", "
			}
			row.Rules += Printable(orDash(rule))
		}
		row.Sent += n.Sent
		row.Received += n.Received
		row.Last = fmtTime(e.Time)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Session != rows[j].Session {
			return rows[i].Session < rows[j].Session
		}
		return rows[i].Conns+rows[i].Refused > rows[j].Conns+rows[j].Refused
	})
	return rows, more
}
