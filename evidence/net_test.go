package evidence

import (
	"bytes"
	"strings"
	"testing"
)

func sampleNet() *Record {
	return &Record{Version: 1, Type: TypeNet, Principal: "USER", Taint: []string{"UNTRUSTED", "WEB_DERIVED"}, Parents: []string{},
		Meta: Meta{Time: "2026-03-01T12:00:00.5Z", Op: "connect", Verdict: "allow", Rule: "RN-web", Session: "agent", UID: 1000,
			Reason: "a web host: what it sends taints the session UNTRUSTED|WEB_DERIVED"},
		Payload: &Payload{Detail: "network.hosts *", Net: &NetConn{Host: "example.org", Port: 443, Channel: "web", Sent: 517, Received: 1 << 40, DurationUS: 1234}}}
}

// A net record's canonical form is the reference JCS encoder's, round-trips
// through ParseRecord, and keeps payload.net's members in order.
func TestNetRecordCanonical(t *testing.T) {
	for _, r := range []*Record{sampleNet(), func() *Record {
		r := sampleNet()
		r.Payload.Detail, r.Payload.Net.Host, r.Payload.Net.Channel = "", "::1", "deny"
		r.Meta.Verdict, r.Meta.Rule = "deny", "RN-deny"
		return r
	}()} {
		c, err := r.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := canonicalJCS(r)
		if err != nil || !bytes.Equal(c, ref) {
			t.Fatalf("got  %s\nwant %s", c, ref)
		}
		back, err := ParseRecord(c)
		if err != nil || *back.Payload.Net != *r.Payload.Net {
			t.Fatalf("round trip: %v %+v", err, back)
		}
	}
	c, _ := sampleNet().Canonical()
	if !strings.Contains(string(c), `"net":{"channel":"web","duration_us":1234,"host":"example.org","port":443,"received":1099511627776,"sent":517}`) {
		t.Errorf("payload.net: %s", c)
	}
}

func TestNetRecordSchema(t *testing.T) {
	for _, c := range []struct {
		edit func(*Record)
		want string
	}{
		{func(r *Record) { r.Payload.Net = nil }, "net record without payload.net"},
		{func(r *Record) { r.Payload = nil }, "net record without payload.net"},
		{func(r *Record) { r.Type = TypeVerdict }, "payload.net in a verdict record"},
		{func(r *Record) { r.Payload.Net.Host = "" }, "host is empty"},
		{func(r *Record) { r.Payload.Net.Host = "Example.org" }, `has "E"`},
		{func(r *Record) { r.Payload.Net.Host = "a b" }, `has " "`},
		{func(r *Record) { r.Payload.Net.Host = "a\x1b[2J" }, `has "\x1b"`},
		{func(r *Record) { r.Payload.Net.Host = strings.Repeat("a", 254) }, "longer than 253"},
		{func(r *Record) { r.Payload.Net.Port = 0 }, "port 0 out of range"},
		{func(r *Record) { r.Payload.Net.Port = 65536 }, "port 65536 out of range"},
		{func(r *Record) { r.Payload.Net.Channel = "WEB" }, `channel "WEB" is not`},
		{func(r *Record) { r.Payload.Net.Sent = -1 }, "sent -1 out of range"},
		{func(r *Record) { r.Payload.Net.Received = 1 << 53 }, "received 9007199254740992 out of range"},
		{func(r *Record) { r.Payload.Net.DurationUS = -5 }, "duration_us -5 out of range"},
	} {
		r := sampleNet()
		c.edit(r)
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want …%s…", err, c.want)
		}
	}
	// Unknown members of payload.net are refused by the reader.
	c, _ := sampleNet().Canonical()
	bad := bytes.Replace(c, []byte(`"sent":517}`), []byte(`"sent":517,"zz":1}`), 1)
	if _, err := ParseRecord(bad); err == nil {
		t.Error("an unknown member of payload.net was accepted")
	}
}
