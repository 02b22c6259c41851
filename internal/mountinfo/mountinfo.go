// Package mountinfo reads a mount table as the kernel shows it in
// /proc/<pid>/mountinfo.
//
// # One table, read whole
//
// Other programs mount and unmount while aerfs looks for its mounts (FUSE
// test suites, container runtimes, automounters). The table is read into
// memory through one open file, to its end, before anything in it is
// looked at; then it is parsed. The kernel walks the table by mount id
// across the reads of one open file, so a mount that stays mounted during
// the read is in the result exactly once, whatever comes and goes beside
// it. Nothing here scans lines while reading, and no lookup reads the
// file twice.
package mountinfo

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file (proc(5)).
type Mount struct {
	ID, Parent   int
	Major, Minor uint32
	Root         string // the mounted directory within its file system
	Point        string // where it is mounted
	Options      string // per-mount options (rw, nosuid …)
	Optional     []string
	FSType       string // "fuse.aerfs", "tmpfs" …
	Source       string
	SuperOptions string
}

// Self reads the calling process's mount table.
func Self() ([]Mount, error) { return ReadFile("/proc/self/mountinfo") }

// Of reads the mount table of process pid.
func Of(pid int) ([]Mount, error) {
	return ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
}

// ReadFile reads a mountinfo file whole, then parses it.
func ReadFile(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readAll(f)
	if err != nil {
		return nil, err
	}
	return Parse(b), nil
}

// readAll reads r to its end into one buffer (procfs files report size 0,
// so the buffer grows; a table of a few hundred mounts takes a few reads).
func readAll(r io.Reader) ([]byte, error) {
	b := make([]byte, 0, 64<<10)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return b, nil
		}
	}
}

// Parse parses the text of a mountinfo file; malformed lines are skipped.
func Parse(b []byte) []Mount {
	var out []Mount
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := parseLine(line); ok {
			out = append(out, m)
		}
	}
	return out
}

func parseLine(line string) (Mount, bool) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) < sep+3 {
		return Mount{}, false
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return Mount{}, false
	}
	if m.Parent, err = strconv.Atoi(f[1]); err != nil {
		return Mount{}, false
	}
	maj, min, ok := strings.Cut(f[2], ":")
	if !ok {
		return Mount{}, false
	}
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return Mount{}, false
	}
	m.Major, m.Minor = uint32(ma), uint32(mi)
	m.Root, m.Point, m.Options = Unescape(f[3]), Unescape(f[4]), f[5]
	m.Optional = f[6:sep]
	m.FSType, m.Source = f[sep+1], Unescape(f[sep+2])
	if len(f) > sep+3 {
		m.SuperOptions = f[sep+3]
	}
	return m, true
}

// Unescape undoes the octal escapes (\040 for a space …) of a mountinfo
// field.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Within reports whether path p is at or beneath the mount point dir.
func Within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
