package flow

import (
	"testing"

	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/policy"
)

func TestWriterLabels(t *testing.T) {
	if writer(policy.Subject{Principal: policy.User, Identified: true}) != nil {
		t.Fatal("a clean USER write left a label")
	}
	l := writer(policy.Subject{Principal: policy.Web, Identified: true})
	if l == nil || l.Taint&policy.WebDerived == 0 || l.Origin != policy.Web {
		t.Fatalf("WEB write label = %+v", l)
	}
	// Appending to a WEB file as USER keeps the WEB origin and taint.
	merged := meet(l, nil)
	if merged.Origin != policy.Web || merged.Taint != l.Taint {
		t.Fatalf("meet = %+v", merged)
	}
	m2 := meet(&label.Label{Origin: policy.ToolAuth, Taint: policy.ToolOutput}, l)
	if m2.Origin != policy.Web || m2.Taint&policy.ToolOutput == 0 {
		t.Fatalf("meet keeps the lower origin and the union of taint: %+v", m2)
	}
}
