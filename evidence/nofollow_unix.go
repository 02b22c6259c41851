//go:build unix

package evidence

import "syscall"

const syscallNoFollow = syscall.O_NOFOLLOW
