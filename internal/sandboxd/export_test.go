package sandboxd

// SetDraining marks s as shutting down (or not), as Serve does when its
// context ends.
func SetDraining(s *Server, draining bool) {
	s.mu.Lock()
	s.draining = draining
	s.mu.Unlock()
}
