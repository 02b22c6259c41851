package daemon

import (
	"github.com/aerfs/aerfs/evidence"
)

// lastKnownState is what the log says the guarded files held last.
func lastKnownState(stateDir string) (map[string]string, error) {
	st := map[string]string{}
	err := evidence.ReadAll(stateDir, func(_ int64, _ string, r *evidence.Record) error {
		p := r.Payload
		switch r.Type {
		case evidence.TypeWrite, evidence.TypeDrift:
			if p != nil && p.NewHash != "" {
				st[r.Meta.Path] = p.NewHash
			}
		case evidence.TypeDelete:
			st[r.Meta.Path] = ""
		case evidence.TypeRename:
			if p != nil && p.From != "" {
				if _, ok := st[p.From]; ok {
					st[p.From] = ""
				}
			}
		case evidence.TypeRestore:
			if p != nil {
				for _, f := range p.Files {
					st[f.Path] = f.Hash
				}
			}
		case evidence.TypeSnapshot:
			if p != nil {
				for k := range st {
					st[k] = ""
				}
				for _, f := range p.Files {
					st[f.Path] = f.Hash
				}
			}
		}
		return nil
	})
	return st, err
}
