// Package procstat reads what the kernel says of a process: its memory,
// for the soak test and the state benchmark, and the fields of its /proc
// files.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS is the resident set size of process pid in KiB (VmRSS of
// /proc/PID/status), 0 when it cannot be read.
func RSS(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// Fields are the "key: value" lines of a /proc file such as
// /proc/PID/status or /proc/PID/fdinfo/N, values trimmed.
func Fields(b []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
