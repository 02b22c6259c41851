// Package procstat reads what the kernel says of a process's memory, for
// the soak test and the state benchmark.
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
