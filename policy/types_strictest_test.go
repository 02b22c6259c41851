package policy

import "testing"

// Strictest orders every pair of classes, both ways round.
func TestStrictest(t *testing.T) {
	order := []Class{Identity, Control, Memory, Secret, Plain}
	for i, a := range order {
		for j, b := range order {
			want := a
			if j < i {
				want = b
			}
			if got := Strictest(a, b); got != want {
				t.Errorf("Strictest(%v, %v) = %v, want %v", a, b, got, want)
			}
		}
	}
}
