package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/noredirect"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// ProxyOptions configure a Proxy. Zero values take the defaults noted.
type ProxyOptions struct {
	Resolver Resolver // required
	Metrics  *Metrics // optional
	Logger   *slog.Logger

	DialTimeout           time.Duration // default 5s
	ResponseHeaderTimeout time.Duration // 0: none; exec streams may take long to answer
	DialRetries           int           // extra attempts after a refused dial; 0 disables
	RetryBackoff          time.Duration // first retry delay, doubled each time; default 50ms
	// MaxTimeout caps a request's X-Sandbox-Timeout; default DefaultProxyTimeout.
	MaxTimeout time.Duration

	// DeclaredPortsOnly forwards a request only to a port the Sandbox's containers declare
	// (Target.Ports) or one in AllowedPorts, and refuses others with a 403. Off, every port goes:
	// for resolvers that know no pod spec (tests). Run always turns it on.
	DeclaredPortsOnly bool
	// AllowedPorts are forwarded to on every Sandbox, declared or not (--allowed-ports).
	AllowedPorts []uint16
	// Waker resumes paused Sandboxes that wake on request (nil: requests to them get the 503 of
	// any Sandbox that is not ready).
	Waker Waker
	// WakeTimeout is how long a request waits for a Sandbox it woke (X-Sandbox-Wake-Timeout
	// otherwise); default DefaultWakeTimeout.
	WakeTimeout time.Duration
	// SandboxdPorts are the ports sandboxd serves, the only ones the session's env
	// (Target.SessionEnv) is sent to; default DefaultAllowedPorts.
	SandboxdPorts []uint16
	// UnclaimedWait is how long a request to an unclaimed warm pool member waits for the cache to
	// see a claim take it, before the 404; 0 answers at once. See Proxy.resolve.
	UnclaimedWait time.Duration
	// TracerProvider, when it records, has the proxy send the sandbox the router's span as
	// traceparent (tracing.go); the handler's must be the same.
	TracerProvider trace.TracerProvider
}

// DefaultProxyTimeout is the default cap of X-Sandbox-Timeout (--proxy-timeout), as upstream's
// PROXY_TIMEOUT_SECONDS (180 s).
const DefaultProxyTimeout = 180 * time.Second

// Proxy forwards a routed request to its Sandbox's pod, streaming both ways.
type Proxy struct {
	resolver      Resolver
	metrics       *Metrics
	log           *slog.Logger
	rp            *httputil.ReverseProxy
	h1, h2c       *http.Transport
	maxTimeout    time.Duration
	declaredOnly  bool
	allowedPorts  []uint16
	sandboxdPorts []uint16
	waker         Waker
	wakeTimeout   time.Duration
	resuming      sync.Map // cacheKey -> struct{}: a resume in flight
	touched       sync.Map // cacheKey -> time.Time: last activity touch sent
	touchClient   *http.Client
	touchPort     uint16 // sandboxd's port, where activity notes go (DefaultPort; tests change it)
	unclaimedWait time.Duration
}

// NewProxy builds the proxy and its two upstream transports: HTTP/1.1 and HTTP/2 over cleartext
// with prior knowledge (h2c). Inbound HTTP/2 goes out as h2c so that gRPC (HTTP/2 with trailers)
// passes end to end; everything else, including WebSocket upgrades, goes out as HTTP/1.1.
func NewProxy(o ProxyOptions) *Proxy {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 50 * time.Millisecond
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultProxyTimeout
	}
	if o.SandboxdPorts == nil {
		o.SandboxdPorts = DefaultAllowedPorts
	}
	if o.WakeTimeout <= 0 {
		o.WakeTimeout = DefaultWakeTimeout
	}
	p := &Proxy{resolver: o.Resolver, metrics: o.Metrics, log: o.Logger, maxTimeout: o.MaxTimeout,
		declaredOnly: o.DeclaredPortsOnly, allowedPorts: slices.Clone(o.AllowedPorts),
		sandboxdPorts: slices.Clone(o.SandboxdPorts), unclaimedWait: o.UnclaimedWait,
		waker: o.Waker, wakeTimeout: o.WakeTimeout}
	p.h1 = newTransport(o, false)
	p.h2c = newTransport(o, true)
	// A sandbox's answer to an activity note is never followed: a 3xx toward another pod would
	// make the router, which every Sandbox's NetworkPolicy admits, act on another tenant's sandbox.
	p.touchClient = noredirect.Client(&http.Client{Transport: p.h1})
	p.touchPort = DefaultPort
	p.rp = &httputil.ReverseProxy{
		Rewrite: tracedRewrite(o.TracerProvider, rewrite),
		Transport: &retryTransport{h1: p.h1, h2c: p.h2c, resolver: o.Resolver, metrics: o.Metrics,
			retries: max(o.DialRetries, 0), backoff: o.RetryBackoff, portAllowed: p.portAllowed},
		FlushInterval:  -1, // flush every write: exec output and SSE must not sit in a buffer
		ErrorHandler:   p.proxyError,
		ModifyResponse: modifyResponse,
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
		BufferPool:     bufferPool{},
	}
	return p
}

func newTransport(o ProxyOptions, h2c bool) *http.Transport {
	d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	var protos http.Protocols
	if h2c {
		protos.SetUnencryptedHTTP2(true) // alone: prior-knowledge h2c for http:// URLs
	} else {
		protos.SetHTTP1(true)
	}
	return &http.Transport{
		Proxy:                 nil, // never an environment proxy: targets are pod IPs
		DialContext:           d.DialContext,
		Protocols:             &protos,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // pass bodies through byte for byte
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second, // notice dead upstream connections
			PingTimeout:     15 * time.Second,
		},
	}
}

// Close drops idle upstream connections.
func (p *Proxy) Close() {
	p.h1.CloseIdleConnections()
	p.h2c.CloseIdleConnections()
}

// routeCtx carries the resolved route from ServeHTTP to the rewrite, transport and error hooks.
type routeCtx struct {
	route  Route
	uid    types.UID     // of the Sandbox resolved; a retry never goes to another
	host   string        // ip:port
	inBody io.ReadCloser // the client's request body, ended when the sandbox refuses it
	idle   *idleTimer    // X-Sandbox-Timeout; nil without the header
	env    string        // wire.HeaderSessionEnv for sandboxd; "" for none
}

type routeCtxKey struct{}

func routeFrom(ctx context.Context) *routeCtx {
	rc, _ := ctx.Value(routeCtxKey{}).(*routeCtx)
	return rc
}

// ServeHTTP validates the routing headers, resolves the Sandbox from the cache and forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		// A CONNECT would make the router a tunnel to wherever the pod lets it reach.
		writeDetail(w, http.StatusMethodNotAllowed, "CONNECT is not supported.")
		return
	}
	route, err := ParseRoute(r.Header)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	timeout, err := ParseTimeout(r.Header, p.maxTimeout)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	wakeBound, err := ParseWakeTimeout(r.Header, maxWakeTimeout)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	target, err := p.resolve(r.Context(), route)
	if p.shouldWait(scopeFrom(r.Context()), route, target, err) {
		if wakeBound == 0 {
			wakeBound = p.wakeTimeout
		}
		target, err = p.wakeAndWait(r.Context(), route, wakeBound)
	}
	if no := p.admit(r.Context(), scopeFrom(r.Context()), route, target, err); no != nil {
		if no.retry {
			w.Header().Set("Retry-After", "1")
		}
		writeDetail(w, no.code, no.detail)
		return
	}
	rc := &routeCtx{route: route, uid: target.UID, host: netip.AddrPortFrom(target.Addr, route.Port).String(), inBody: r.Body}
	if slices.Contains(p.sandboxdPorts, route.Port) {
		rc.env = target.SessionEnv // for sandboxd alone, not for whatever else the pod serves
	} else {
		p.touch(target, route) // sandboxd does not see this request: tell it, for the idle pause
	}
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		// Let the upstream's response stream back while the client is still sending (exec with
		// stdin); by default net/http would hold the response until the body is consumed.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	ctx := context.WithValue(r.Context(), routeCtxKey{}, rc)
	if timeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		rc.idle = newIdleTimer(timeout, func() { cancel(errSandboxTimeout) })
		defer rc.idle.stop()
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &idleReader{ReadCloser: r.Body, t: rc.idle}
		}
	}
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// errSandboxTimeout is the cause of a request's context when its X-Sandbox-Timeout passed.
var errSandboxTimeout = errors.New("X-Sandbox-Timeout passed")

// idleTimer enforces X-Sandbox-Timeout the way upstream's Python router does through httpx: the
// time allowed for the sandbox's response headers and between any two reads of either body, not
// for the whole exchange, so a long download that keeps moving is not cut.
type idleTimer struct {
	d time.Duration
	t *time.Timer
}

func newIdleTimer(d time.Duration, fire func()) *idleTimer {
	return &idleTimer{d: d, t: time.AfterFunc(d, fire)}
}

// touch restarts the countdown; a timer that already fired stays fired.
func (it *idleTimer) touch() {
	if it.t.Stop() {
		it.t.Reset(it.d)
	}
}

func (it *idleTimer) stop() { it.t.Stop() }

// idleReader restarts the countdown whenever bytes move.
type idleReader struct {
	io.ReadCloser
	t *idleTimer
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.t.touch()
	}
	return n, err
}

// shouldWait: the Sandbox wakes on request and is paused or starting, and nothing admit checks
// on a known Sandbox would refuse the request anyway (a scoped token for an earlier Sandbox of
// the name, an undeclared port): such a request must not wake anything.
func (p *Proxy) shouldWait(scope *scopedtoken.Claims, route Route, t Target, err error) bool {
	var re *ResolveError
	return p.waker != nil && t.Wakes && errors.As(err, &re) && errors.Is(re.Kind, ErrNotReady) && waitsForWake(re.Reason) &&
		(scope == nil || types.UID(scope.UID) == t.UID) && p.portAllowed(t, route.Port)
}

// resolve asks the resolver. For an unclaimed warm pool member it waits up to UnclaimedWait for
// the cache to see a claim take it: the claim controller adopts the member (its commit point) and
// only then writes the claim's status, but a client acting on that status may still be faster
// than the router's watch, and a just-claimed sandbox must answer its first request.
func (p *Proxy) resolve(ctx context.Context, route Route) (Target, error) {
	t, err := p.resolver.Resolve(route.Namespace, route.Name)
	n, ok := p.resolver.(changeNotifier)
	if !ok || p.unclaimedWait <= 0 || !errors.Is(err, ErrUnclaimed) {
		return t, err
	}
	timer := time.NewTimer(p.unclaimedWait)
	defer timer.Stop()
	for {
		changed := n.Changed(route.Namespace, route.Name)
		// Resolved after subscribing, so that an event in between is not missed.
		if t, err = p.resolver.Resolve(route.Namespace, route.Name); !errors.Is(err, ErrUnclaimed) {
			return t, err
		}
		select {
		case <-changed:
		case <-timer.C:
			return t, err
		case <-ctx.Done():
			return t, err
		}
	}
}

// refusal is an answer of the router itself instead of the sandbox's.
type refusal struct {
	code   int
	detail string
	retry  bool // Retry-After: 1
}

// admit decides whether a resolved request goes on. Once the Sandbox is known, the checks run
// from the one about the caller (a scoped token for an earlier Sandbox of the name learns
// nothing of this one) to the permanent refusals, then the port, then readiness, so a request
// that can never succeed is not told to retry.
func (p *Proxy) admit(ctx context.Context, scope *scopedtoken.Claims, route Route, t Target, err error) *refusal {
	var re *ResolveError
	if err != nil && !errors.As(err, &re) {
		logging.FromContext(ctx, p.log).Error("resolving sandbox", "route", route.Namespace+"/"+route.Name, "err", err)
		return &refusal{http.StatusServiceUnavailable, "Could not resolve the backend sandbox: " + route.Name, true}
	}
	switch {
	case re != nil && errors.Is(re.Kind, ErrNotFound):
		return &refusal{code: http.StatusNotFound, detail: re.Error()}
	case re != nil && re.Reason == reasonCacheSyncing:
		return &refusal{http.StatusServiceUnavailable, re.Error(), true}
	case scope != nil && types.UID(scope.UID) != t.UID:
		return &refusal{code: http.StatusForbidden, detail: staleScopeMessage(route)}
	case re != nil && errors.Is(re.Kind, ErrRefused):
		return &refusal{code: http.StatusForbidden, detail: re.Error()}
	case re != nil && errors.Is(re.Kind, ErrUnclaimed):
		return &refusal{code: http.StatusNotFound, detail: re.Error()}
	case !p.portAllowed(t, route.Port):
		return &refusal{code: http.StatusForbidden, detail: fmt.Sprintf(
			"Port %d is not declared by the containers of sandbox %s/%s.", route.Port, route.Namespace, route.Name)}
	case re != nil:
		return &refusal{http.StatusServiceUnavailable, re.Error(), true}
	}
	return nil
}

// portAllowed: the Sandbox's containers declare port, or it is on the allowlist.
func (p *Proxy) portAllowed(t Target, port uint16) bool {
	return !p.declaredOnly || t.Declares(port) || slices.Contains(p.allowedPorts, port)
}

// rewrite points the outbound request at the pod. Path (escaped form included) and query are
// kept as sent; Host becomes the pod address and the original goes in X-Forwarded-Host.
func rewrite(pr *httputil.ProxyRequest) {
	rc := routeFrom(pr.In.Context())
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = rc.host
	pr.Out.URL.User = nil
	pr.Out.Host = ""
	pr.SetXForwarded()
	// The caller's credentials are for the router, never for the sandbox.
	pr.Out.Header.Del("Authorization")
	// The session's env is the claim's, as the controller admitted it, never the caller's.
	pr.Out.Header.Del(wire.HeaderSessionEnv)
	if rc.env != "" {
		pr.Out.Header.Set(wire.HeaderSessionEnv, rc.env)
	}
}

// Reasons of sandbox_router_upstream_errors_total (upstream's also has tls, for TLS to sandboxes,
// which this router never speaks). A client that went away is not an upstream error.
const (
	upstreamDial     = "dial"
	upstreamTimeout  = "timeout"
	upstreamEOF      = "eof" // the sandbox closed the connection before its answer ended
	upstreamCanceled = "canceled"
	upstreamOther    = "other"
)

func classify(err error) string {
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return upstreamDial
	case errors.Is(err, context.Canceled):
		return upstreamCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return upstreamTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return upstreamEOF
	}
	return upstreamOther
}

func (p *Proxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	id, ns := "", ""
	if rc := routeFrom(r.Context()); rc != nil {
		id, ns = rc.route.Name, rc.route.Namespace
	}
	log := logging.FromContext(r.Context(), p.log)
	reason := classify(err)
	if errors.Is(context.Cause(r.Context()), errSandboxTimeout) {
		reason = upstreamTimeout
	}
	if reason != upstreamCanceled {
		p.metrics.upstreamError(ns, reason)
	}
	switch reason {
	case upstreamDial:
		log.Warn("sandbox unreachable", "err", err)
		writeDetail(w, http.StatusBadGateway, "Could not connect to the backend sandbox: "+id)
	case upstreamTimeout:
		log.Warn("sandbox timed out", "err", err)
		writeDetail(w, http.StatusGatewayTimeout, "Timed out waiting for the backend sandbox: "+id)
	case upstreamCanceled:
		// The client went away; nobody reads this answer.
		log.Debug("client canceled")
		w.WriteHeader(http.StatusBadGateway)
	default:
		log.Warn("proxying failed", "err", err)
		writeDetail(w, http.StatusBadGateway, "Error proxying to the backend sandbox: "+id)
	}
}

// retryTransport picks the upstream protocol and retries failed dials. Only requests without a
// body are retried, so nothing is ever sent twice; dial timeouts are not retried, since they
// already took the whole dial timeout.
type retryTransport struct {
	h1, h2c     http.RoundTripper
	resolver    Resolver
	metrics     *Metrics
	retries     int
	backoff     time.Duration
	portAllowed func(Target, uint16) bool
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt := t.h1
	if req.ProtoMajor == 2 {
		rt = t.h2c
	}
	delay := t.backoff
	for attempt := 0; ; attempt++ {
		resp, err := rt.RoundTrip(req)
		if err == nil || attempt >= t.retries || !retryable(req, err) {
			return resp, err
		}
		timer := time.NewTimer(delay)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		delay *= 2
		if rc := routeFrom(req.Context()); rc != nil {
			t.metrics.retry(rc.route.Namespace)
		}
		// The pod may have been replaced meanwhile; follow the cache, and stop if the Sandbox is
		// gone, no longer ready, or another Sandbox of the same name.
		if next, ok := t.reresolve(req); ok {
			req = next
		} else {
			return nil, err
		}
	}
}

func retryable(req *http.Request, err error) bool {
	if req.Body != nil && req.Body != http.NoBody {
		return false
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func (t *retryTransport) reresolve(req *http.Request) (*http.Request, bool) {
	rc := routeFrom(req.Context())
	if rc == nil {
		return req, true
	}
	target, err := t.resolver.Resolve(rc.route.Namespace, rc.route.Name)
	if err != nil || target.UID != rc.uid || !t.portAllowed(target, rc.route.Port) {
		return nil, false
	}
	host := netip.AddrPortFrom(target.Addr, rc.route.Port).String()
	if host == req.URL.Host {
		return req, true
	}
	next := req.Clone(req.Context())
	next.URL.Host = host
	return next, true
}

// writeDetail writes the router's error shape, {"detail": msg}.
func writeDetail(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(struct {
		Detail string `json:"detail"`
	}{msg})
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// bufferPool recycles the 32 KiB copy buffers of httputil.ReverseProxy.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *(copyBuffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// modifyResponse runs on the sandbox's response headers: it restarts or ends the
// X-Sandbox-Timeout countdown and ends refused uploads.
func modifyResponse(resp *http.Response) error {
	if resp.Request != nil {
		if rc := routeFrom(resp.Request.Context()); rc != nil && rc.idle != nil {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				rc.idle.stop() // upgraded connections last as long as they last
			} else {
				rc.idle.touch()
				resp.Body = &idleReader{ReadCloser: resp.Body, t: rc.idle}
			}
		}
	}
	return stopBodyOnRefusal(resp)
}

// stopBodyOnRefusal ends the upload when the sandbox refuses a request before reading its body
// (a 4xx/5xx to a PUT, say). Over HTTP/2 the client stops sending on the early answer while the
// upstream stream waits for the rest of the body; closing it lets both sides finish at once.
// The outbound body is wrapped by ReverseProxy so that closing it is a no-op; close the
// client's own body instead.
func stopBodyOnRefusal(resp *http.Response) error {
	if resp.StatusCode < http.StatusBadRequest || resp.Request == nil {
		return nil
	}
	if rc := routeFrom(resp.Request.Context()); rc != nil && rc.inBody != nil {
		_ = rc.inBody.Close()
	}
	return nil
}
