package sandboxd

import (
	"net/http"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
)

// EnvdHandler serves E2B's in-sandbox API (package envd) as Run does on
// EnvdListen: every request counts as activity, and the session
// environment the router sends reaches the commands it starts.
func (s *Server) EnvdHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := s.activity.begin()
		defer end()
		r, err := withSessionEnv(r)
		if err != nil {
			respond.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		s.envd.ServeHTTP(w, r)
	})
}

// runningProcesses counts the commands that run on without a request: the
// background processes of /v1/processes and those started through envd.
func (s *Server) runningProcesses() int {
	return s.exec.RunningProcesses() + s.envd.RunningProcesses()
}
