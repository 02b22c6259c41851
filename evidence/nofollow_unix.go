//go:build unix

package evidence

import "syscall"

const syscallNoFollow = syscall.O_NOFOLLOW

// syscallNonBlock keeps an open of a FIFO or device from waiting for a
// writer; readers fstat what they opened and refuse anything not regular.
const syscallNonBlock = syscall.O_NONBLOCK
