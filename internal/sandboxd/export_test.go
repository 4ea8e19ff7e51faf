package sandboxd

import "time"

// SetDraining marks s as shutting down (or not), as Serve does when its
// context ends.
func SetDraining(s *Server, draining bool) {
	s.mu.Lock()
	s.draining = draining
	s.mu.Unlock()
}

// SetWarmUpTimeout changes the warm-up's bound until the returned function restores it.
func SetWarmUpTimeout(d time.Duration) (restore func()) {
	old := warmUpTimeout
	warmUpTimeout = d
	return func() { warmUpTimeout = old }
}
