package evidence

import "strconv"

// appendCanonical writes r's RFC 8785 form directly. Every member name is
// ASCII, so sorting by UTF-16 code units is sorting these fixed names; the
// only other rules that apply are JCS string escaping and integers.
// FuzzCanonicalRoundTrip and TestCanonicalMatchesJCS check it against
// github.com/gowebpki/jcs. r must have passed Validate (valid UTF-8).
func appendCanonical(b []byte, r *Record) []byte {
	m := &r.Meta
	b = append(b, `{"meta":{`...)
	first := true
	str := func(name, v string) {
		if v == "" {
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b = appendJCSString(b, v)
	}
	num := func(name string, v int64, omitZero bool) {
		if v == 0 && omitZero {
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, v, 10)
	}
	str("class", m.Class)
	str("exe", m.Exe)
	str("exe_b64", m.ExeB64)
	num("folded", int64(m.Folded), true)
	str("op", m.Op)
	str("path", m.Path)
	str("path_b64", m.PathB64)
	num("pid", int64(m.Pid), true)
	str("reason", m.Reason)
	str("rule", m.Rule)
	str("session", m.Session)
	str("time", m.Time)
	num("uid", int64(m.UID), false)
	str("verdict", m.Verdict)
	b = append(b, `},"parents":`...)
	b = appendJCSStrings(b, r.Parents)
	if p := r.Payload; p != nil {
		b = append(b, `,"payload":{`...)
		first = true
		str("detail", p.Detail)
		if len(p.Files) > 0 {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `"files":[`...)
			for i := range p.Files {
				f := &p.Files[i]
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '{')
				if f.Hash != "" {
					b = append(b, `"hash":`...)
					b = appendJCSString(b, f.Hash)
					b = append(b, ',')
				}
				if f.OldHash != "" {
					b = append(b, `"old_hash":`...)
					b = appendJCSString(b, f.OldHash)
					b = append(b, ',')
				}
				if f.Path != "" {
					b = append(b, `"path":`...)
					b = appendJCSString(b, f.Path)
				} else {
					b = append(b, `"path_b64":`...)
					b = appendJCSString(b, f.PathB64)
				}
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		str("from", p.From)
		str("from_b64", p.FromB64)
		if n := p.Net; n != nil {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendNet(b, n)
		}
		str("new_hash", p.NewHash)
		str("old_hash", p.OldHash)
		if len(p.Pruned) > 0 {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `"pruned":`...)
			b = appendJCSStrings(b, p.Pruned)
		}
		if len(p.Reads) > 0 {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendReads(b, p.Reads)
		}
		str("to", p.To)
		str("to_b64", p.ToB64)
		b = append(b, '}')
	}
	b = append(b, `,"principal":`...)
	b = appendJCSString(b, r.Principal)
	b = append(b, `,"taint":`...)
	b = appendJCSStrings(b, r.Taint)
	b = append(b, `,"type":`...)
	b = appendJCSString(b, r.Type)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(r.Version), 10)
	return append(b, '}')
}

// appendNet writes "net":{…}, its members in code-unit order.
func appendNet(b []byte, n *NetConn) []byte {
	b = append(b, `"net":{"channel":`...)
	b = appendJCSString(b, n.Channel)
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, n.DurationUS, 10)
	b = append(b, `,"host":`...)
	b = appendJCSString(b, n.Host)
	b = append(b, `,"port":`...)
	b = strconv.AppendInt(b, int64(n.Port), 10)
	b = append(b, `,"received":`...)
	b = strconv.AppendInt(b, n.Received, 10)
	b = append(b, `,"sent":`...)
	b = strconv.AppendInt(b, n.Sent, 10)
	return append(b, '}')
}

func appendJCSStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJCSString(b, s)
	}
	return append(b, ']')
}

// appendJCSString escapes as ECMAScript JSON.stringify does (RFC 8785
// §3.2.2.2): the two-character escapes, \u00xx in lowercase hex for the
// other controls, and every other character as raw UTF-8.
func appendJCSString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
