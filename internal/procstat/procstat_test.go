package procstat

import (
	"os"
	"testing"
)

func TestRSS(t *testing.T) {
	if RSS(os.Getpid()) <= 0 {
		t.Fatal("this process has no resident memory")
	}
	if RSS(-1) != 0 {
		t.Fatal("a process that does not exist has resident memory")
	}
}
