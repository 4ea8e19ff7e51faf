package sandboxd

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// route is one endpoint. With prefix set, the pattern is a prefix and the
// rest of the (decoded, uncleaned) URL path is the file path argument. We do
// our own routing because http.ServeMux cleans paths and redirects "..",
// which would turn an escape attempt into a redirect instead of a 403.
type route struct {
	method  string
	pattern string // exact path, or prefix ending in "/" when prefix is set
	prefix  bool
	name    string // metrics label
	public  bool   // no token needed
	h       func(w http.ResponseWriter, r *http.Request, arg string)
}

func (s *Server) buildRoutes() []route {
	exact := func(method, p string, h http.HandlerFunc) route {
		return route{method: method, pattern: p, name: p, h: func(w http.ResponseWriter, r *http.Request, _ string) { h(w, r) }}
	}
	file := func(method, p string, h func(http.ResponseWriter, *http.Request, string)) route {
		return route{method: method, pattern: p, prefix: true, name: p + "{path}", h: h}
	}
	rs := []route{
		exact("GET", "/", s.legacy.Root),
		exact("GET", "/healthz", s.handleHealth),
		exact("GET", "/metadata", s.handleMetadata),
		exact("GET", "/metrics", s.handleMetrics),
		exact("GET", "/v1/health", s.handleV1Health),
		exact("GET", "/v1/metadata", s.handleV1Metadata),
		exact("GET", "/v1/activity", s.handleActivity),
		exact("POST", "/v1/activity", s.handleTouch),
		exact("POST", "/v1/exec", s.exec.Exec),
		exact("GET", "/v1/exec/ws", s.exec.ExecWS),
		exact("POST", "/v1/processes", s.exec.StartProcess),
		exact("GET", "/v1/processes", s.exec.ListProcesses),
		{method: "GET", pattern: "/v1/processes/", prefix: true, name: "/v1/processes/{id}", h: s.exec.GetProcess},
		{method: "POST", pattern: "/v1/processes/", prefix: true, name: "/v1/processes/{id}/signal", h: s.exec.PostProcess},
		{method: "DELETE", pattern: "/v1/processes/", prefix: true, name: "/v1/processes/{id}", h: s.exec.DeleteProcess},
		file("GET", "/v1/files/", s.files.GetFile),
		file("PUT", "/v1/files/", s.files.PutFile),
		file("DELETE", "/v1/files/", s.files.DeleteFile),
		file("POST", "/v1/mkdir/", s.files.Mkdir),
		file("GET", "/v1/stat/", s.files.Stat),
		file("GET", "/v1/list/", s.files.List),
		file("GET", "/v1/watch/", s.files.Watch),
		exact("POST", "/execute", s.legacy.Execute),
		exact("POST", "/upload", s.legacy.Upload),
		file("GET", "/download/", s.legacy.Download),
		file("GET", "/list/", s.legacy.List),
		file("GET", "/exists/", s.legacy.Exists),
	}
	for i := range rs {
		if rs[i].pattern == "/" || rs[i].pattern == "/healthz" || rs[i].pattern == "/v1/health" {
			rs[i].public = true
		}
	}
	return rs
}

// match finds the route for r. It returns the route, the path argument, and
// the methods allowed on the path when only the method did not match.
func (s *Server) match(r *http.Request) (*route, string, []string) {
	p := r.URL.Path
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	var allowed []string
	for i := range s.routes {
		rt := &s.routes[i]
		arg, ok := "", false
		switch {
		case !rt.prefix:
			ok = p == rt.pattern
		case strings.HasPrefix(p, rt.pattern):
			arg, ok = p[len(rt.pattern):], true
		case p == strings.TrimSuffix(rt.pattern, "/"): // "/v1/list" lists the root
			ok = true
		}
		if !ok {
			continue
		}
		if rt.method == method {
			return rt, arg, nil
		}
		allowed = append(allowed, rt.method)
	}
	return nil, "", allowed
}

// requestLogger names the request in every line about it: its route and the id the router
// gives every request it forwards (X-Request-Id), which the router's lines carry too.
func requestLogger(base *slog.Logger, r *http.Request, route string) *slog.Logger {
	log := base.With("route", route)
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 {
		log = log.With("requestID", id)
	}
	return log
}

// serveRequest routes, authenticates, instruments and logs one request (ServeHTTP, in
// tracing.go, wraps it in a span).
func (s *Server) serveRequest(w http.ResponseWriter, r *http.Request) {
	if isGRPC(r.ProtoMajor, r.Header.Get("Content-Type")) {
		end := s.activity.begin()
		defer end()
		s.grpc.ServeHTTP(w, r) // the ProcessService, on the HTTP port too (reachable through the router)
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	rt, arg, allowed := s.match(r)
	if countsAsActivity(rt) {
		end := s.activity.begin()
		defer end()
	}
	name := "unmatched"
	if rt != nil {
		name = rt.name
	}
	log := requestLogger(s.log, r, name)
	r = r.WithContext(logging.IntoContext(r.Context(), log))
	defer func() { s.finishRequest(recover(), log, sw, r.Method, name, start) }()

	switch {
	case rt == nil && len(allowed) > 0:
		slices.Sort(allowed)
		sw.Header().Set("Allow", strings.Join(slices.Compact(allowed), ", "))
		respond.Error(sw, http.StatusMethodNotAllowed, "method not allowed")
	case rt == nil:
		respond.Error(sw, http.StatusNotFound, "not found")
	case !rt.public && !s.authorized(r):
		sw.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
		respond.Error(sw, http.StatusUnauthorized, "unauthorized")
	default:
		r, err := withSessionEnv(r)
		if err != nil {
			respond.Error(sw, http.StatusBadRequest, err.Error())
			return
		}
		rt.h(sw, r, arg)
	}
}

// withSessionEnv puts the session's environment the router sent (wire.HeaderSessionEnv) in the
// request's context, where every command the request starts takes it from.
func withSessionEnv(r *http.Request) (*http.Request, error) {
	env, err := wire.SessionEnvFromValues(r.Header.Values(wire.HeaderSessionEnv))
	if err != nil || env == nil {
		return r, err
	}
	return r.WithContext(process.WithSessionEnv(r.Context(), env)), nil
}

// statusWriter records the status code. Unwrap keeps http.ResponseController
// and the WebSocket hijack working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote || code == http.StatusSwitchingProtocols {
		w.status = code
	}
	if code >= 200 {
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets code that type-asserts http.Flusher keep working.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// finishRequest ends a request of either port: a handler's panic (recovered, passed in) is logged
// and answered 500 when nothing was written yet, http.ErrAbortHandler is re-raised, and the
// request is counted and logged under its bounded route name.
func (s *Server) finishRequest(recovered any, log *slog.Logger, sw *statusWriter, method, name string, start time.Time) {
	if recovered != nil {
		if recovered == http.ErrAbortHandler {
			panic(recovered)
		}
		log.Error("handler panic", "panic", fmt.Sprint(recovered))
		if !sw.wrote {
			respond.Error(sw, http.StatusInternalServerError, "internal error")
		}
	}
	code := sw.status
	if code == 0 {
		code = http.StatusOK
	}
	d := time.Since(start)
	s.metrics.observeRequest(name, method, code, d)
	log.Debug("request", "method", method, "status", code, "duration", d)
}
