package tracking

import (
	"os"
	"testing"

	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Readers outside sessions are forgotten when their process is gone, which
// is known by its start time: a reused pid is another process.
func TestProcAlive(t *testing.T) {
	pol := policy.Default()
	reg := principal.NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	me := reg.Resolve(os.Getpid())
	if !principal.Alive(me.Proc.ID) {
		t.Fatal("this process is not alive")
	}
	if principal.Alive(principal.ProcID{Tgid: me.Proc.ID.Tgid, Start: me.Proc.ID.Start + 1}) {
		t.Fatal("a reused pid is the same process")
	}
}
