package evidence

import "fmt"

// Reads records (docs/evidence-format.md §3.2).

// validateReads checks payload.reads: absent or non-empty; each element
// names its file exactly once (path or path_b64) and its version exactly
// once: a hash or a well-formed fingerprint.
func validateReads(rs []FileRead) error {
	if rs != nil && len(rs) == 0 {
		return schemaErr("payload.reads is empty (omit it)")
	}
	for i := range rs {
		f := &rs[i]
		if f.Path == "" && f.PathB64 == "" {
			return schemaErr("payload.reads[%d] has neither path nor path_b64", i)
		}
		if err := checkB64(fmt.Sprintf("payload.reads[%d].path", i), f.Path, f.PathB64); err != nil {
			return err
		}
		switch {
		case (f.Hash == "") == (f.Fp == ""):
			return schemaErr("payload.reads[%d] must have exactly one of hash and fp", i)
		case f.Hash != "" && !IsHash(f.Hash):
			return schemaErr("payload.reads[%d].hash %q is not a lowercase hex SHA-256", i, f.Hash)
		case f.Fp != "" && !isFingerprint(f.Fp):
			return schemaErr("payload.reads[%d].fp %q is not <dev>:<ino>:<size>:<mtime_ns>:<ctime_ns>", i, f.Fp)
		}
	}
	return nil
}

// isFingerprint reports whether s is five colon-separated decimal
// integers, each without leading zeros (so each value has one spelling),
// the fourth and fifth possibly negative (times before 1970).
func isFingerprint(s string) bool {
	field := 0
	i := 0
	for field < 5 {
		start := i
		if field >= 3 && i < len(s) && s[i] == '-' {
			i++
			start = i
			if i < len(s) && s[i] == '0' {
				return false // "-0"
			}
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		n := i - start
		if n == 0 || n > 20 || (n > 1 && s[start] == '0') {
			return false
		}
		field++
		if field < 5 {
			if i >= len(s) || s[i] != ':' {
				return false
			}
			i++
		}
	}
	return i == len(s)
}

// Fingerprint formats a file's cheap identity as payload.reads[].fp.
func Fingerprint(dev, ino uint64, size, mtimeNs, ctimeNs int64) string {
	return fmt.Sprintf("%d:%d:%d:%d:%d", dev, ino, size, mtimeNs, ctimeNs)
}

// appendReads writes "reads":[…] canonically: each element's members in
// RFC 8785 order fp or hash, then path or path_b64.
func appendReads(b []byte, rs []FileRead) []byte {
	b = append(b, `"reads":[`...)
	for i := range rs {
		f := &rs[i]
		if i > 0 {
			b = append(b, ',')
		}
		if f.Fp != "" {
			b = append(b, `{"fp":`...)
			b = appendJCSString(b, f.Fp)
		} else {
			b = append(b, `{"hash":`...)
			b = appendJCSString(b, f.Hash)
		}
		if f.Path != "" {
			b = append(b, `,"path":`...)
			b = appendJCSString(b, f.Path)
		} else {
			b = append(b, `,"path_b64":`...)
			b = appendJCSString(b, f.PathB64)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}
