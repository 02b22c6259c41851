package principal

// Within reports whether s is a, or a session started (directly or
// through others) from within a.
func (s *Session) Within(a *Session) bool {
	if a == nil {
		return false
	}
	for x := s; x != nil; x = x.parent {
		if x == a {
			return true
		}
	}
	return false
}

// Outermost is the session at the top of s's tree: s itself unless s was
// started from within another session.
func (s *Session) Outermost() *Session {
	for s != nil && s.parent != nil {
		s = s.parent
	}
	return s
}
