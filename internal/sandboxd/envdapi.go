package sandboxd

import (
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
	fspb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
)

// envdRoutes are the metric and log names of envd's endpoints: each RPC's
// path and the HTTP paths. Anything else is "envd:unmatched", so that
// clients cannot grow the label set.
var envdRoutes = func() map[string]bool {
	routes := map[string]bool{"/health": true, "/files": true, "/init": true, "/envs": true}
	for _, f := range []protoreflect.FileDescriptor{pb.File_envd_process_process_proto, fspb.File_envd_filesystem_filesystem_proto} {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				routes["/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name())] = true
			}
		}
	}
	return routes
}()

func envdRoute(r *http.Request) string {
	if envdRoutes[r.URL.Path] {
		return "envd:" + r.URL.Path
	}
	return "envd:unmatched"
}

// EnvdHandler serves E2B's in-sandbox API (package envd) as Run does on
// EnvdListen: every request counts as activity, is logged and measured
// like the main port's (route "envd:<path>"), traced when tracing is on,
// and the session environment
// the router sends reaches the commands it starts.
func (s *Server) EnvdHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := s.activity.begin()
		defer end()
		start, name := time.Now(), envdRoute(r)
		log := requestLogger(s.log, r, name)
		r = r.WithContext(logging.IntoContext(r.Context(), log))
		sw := &statusWriter{ResponseWriter: w}
		defer func() { s.finishRequest(recover(), log, sw, r.Method, name, start) }()
		if s.tracer != nil {
			ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			method := tracing.HTTPMethod(r.Method)
			ctx, span := s.tracer.Start(ctx, method+" "+name, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.method", method), attribute.String("http.route", name)))
			defer func() { tracing.EndHTTPServerSpan(span, sw.status) }()
			r = r.WithContext(ctx)
		}
		r, err := withSessionEnv(r)
		if err != nil {
			respond.Error(sw, http.StatusBadRequest, err.Error())
			return
		}
		s.envd.ServeHTTP(sw, r)
	})
}

// runningProcesses counts the commands that run on without a request: the
// background processes of /v1/processes and those started through envd.
func (s *Server) runningProcesses() int {
	return s.exec.RunningProcesses() + s.envd.RunningProcesses()
}
