package principal

import (
	"os"
	"testing"
	"time"

	"github.com/aerfs/aerfs/policy"
)

// archiveOf answers from a map, as the log's index does.
type archiveOf map[string]ArchivedSession

func (a archiveOf) ArchivedSession(id string) (ArchivedSession, bool) { s, ok := a[id]; return s, ok }
func (a archiveOf) ArchivedCgroup(string) (ArchivedSession, bool)     { return ArchivedSession{}, false }

// A session that ended with no process left is retired: the registry
// forgets it and tells who asked (OnRetire). A quarantined one, or one
// with a session started from it still known, stays. Retired, its id
// still finds it, with its taint, from the archive.
func TestRetireForgetsAndTells(t *testing.T) {
	pol := policy.Default()
	r := NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	arch := archiveOf{}
	r.SetArchive(arch)
	now := time.Now()
	r.Restore("gone", policy.User, "", "", policy.WebDerived, now)
	r.Restore("held", policy.User, "", "", 0, now)
	r.Restore("parent", policy.User, "", "", 0, now)
	r.Restore("child", policy.User, "parent", "", 0, now)
	for _, id := range []string{"gone", "held", "parent"} {
		r.Session(id).MarkEnded(now)
	}
	r.Session("held").Quarantine()
	var told []string
	r.OnRetire(func(s *Session) { told = append(told, s.ID) })

	retired := r.Retire(r.Retirees())
	if len(retired) != 1 || retired[0].ID != "gone" || len(told) != 1 || told[0] != "gone" {
		t.Fatalf("retired %v, told %v: want only gone", retired, told)
	}
	for _, s := range r.Sessions() {
		if s.ID == "gone" {
			t.Fatal("the registry still holds the retired session")
		}
	}
	arch["gone"] = ArchivedSession{ID: "gone", Principal: policy.User, Taint: policy.WebDerived, Started: now, Ended: now}
	s := r.Session("gone")
	if s == nil || s.Taint()&policy.WebDerived == 0 || s.Ended().IsZero() {
		t.Fatalf("the retired session back from the archive: %+v", s)
	}
}
