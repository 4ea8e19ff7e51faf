package sandboxd

import (
	"context"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// activity is what the idle pause asks about: requests in flight, and when the last one began
// or ended. Probes (health, metrics, this endpoint) do not count: the kubelet and the
// controller ask them all the time.
type activity struct {
	now func() time.Time

	mu       sync.Mutex
	inflight int
	last     time.Time
}

func newActivity(now func() time.Time) *activity {
	return &activity{now: now, last: now()}
}

// begin records a request's start; the returned func records its end.
func (a *activity) begin() func() {
	a.mu.Lock()
	a.inflight++
	a.last = a.now()
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.inflight--
		a.last = a.now()
		a.mu.Unlock()
	}
}

// touch records activity the daemon does not see itself (the router's requests to the pod's
// other ports).
func (a *activity) touch() {
	a.mu.Lock()
	a.last = a.now()
	a.mu.Unlock()
}

// report is the Activity given the running background processes. A running process keeps the
// clock at now.
func (a *activity) report(running int) wire.Activity {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if running > 0 {
		a.last = now
	}
	r := wire.Activity{LastActivity: a.last.UTC(), InflightRequests: a.inflight, RunningProcesses: running}
	r.Active = a.inflight > 0 || running > 0
	if !r.Active {
		r.IdleSeconds = now.Sub(a.last).Seconds()
	}
	return r
}

// countsAsActivity: every route but the probes and the activity endpoint itself.
func countsAsActivity(rt *route) bool {
	return rt != nil && !rt.public && rt.pattern != "/metrics" && rt.pattern != "/v1/activity"
}

// handleActivity serves GET /v1/activity.
func (s *Server) handleActivity(w http.ResponseWriter, _ *http.Request) {
	respond.JSON(w, http.StatusOK, s.activity.report(s.runningProcesses()))
}

// handleTouch serves POST /v1/activity: the router saw a request for the pod that did not come
// through sandboxd.
func (s *Server) handleTouch(w http.ResponseWriter, _ *http.Request) {
	s.activity.touch()
	w.WriteHeader(http.StatusNoContent)
}

// A gRPC call on its own port is activity as an HTTP request is (on the HTTP port, ServeHTTP
// counts it).
func (s *Server) grpcActivityUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	end := s.activity.begin()
	defer end()
	return h(ctx, req)
}

func (s *Server) grpcActivityStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	end := s.activity.begin()
	defer end()
	return h(srv, ss)
}
