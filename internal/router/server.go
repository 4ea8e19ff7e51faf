package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
)

// HandlerOptions assemble the proxy port's handler.
type HandlerOptions struct {
	Proxy     http.Handler
	Guard     GuardOptions // zero: no authentication
	Metrics   *Metrics     // optional
	Logger    *slog.Logger
	AccessLog bool
	// TracerProvider makes a span per request (tracing.go); nil or the no-op provider: none.
	TracerProvider trace.TracerProvider
}

// NewHandler stacks the proxy port: the gateway health check, metrics and access log,
// authentication, then routing.
func NewHandler(o HandlerOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := guard(o.Guard, o.Metrics, o.Logger, o.Proxy)
	h = instrument(o.Metrics, o.AccessLog, h)
	h = traced(o.TracerProvider, h)
	h = withRequestLogger(o.Logger, h)
	return healthShortcut(h)
}

// healthShortcut answers GET /healthz without routing headers on the proxy port itself, for load
// balancer and Gateway health checks; with X-Sandbox-ID the path belongs to the sandbox.
func healthShortcut(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && !hasSandboxID(r.Header) {
			writeOK(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeOK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
}

// instrument counts, times and (with access) logs every request that reaches next, through the
// request's logger (withRequestLogger), which names the request and its route.
func instrument(m *Metrics, access bool, next http.Handler) http.Handler {
	if m == nil && !access {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if m != nil {
			m.inflight.Inc()
		}
		sw := &statusWriter{ResponseWriter: w}
		// Deferred so that a stream aborted with http.ErrAbortHandler is still counted.
		defer func() {
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			elapsed := time.Since(start)
			if m != nil {
				m.inflight.Dec()
				m.observeRequest(r, code, elapsed)
			}
			if access {
				logging.FromContext(r.Context(), slog.Default()).LogAttrs(r.Context(), slog.LevelInfo, "request",
					slog.String("logger", "access"),
					slog.String("method", r.Method), slog.String("path", r.URL.EscapedPath()),
					slog.String("proto", r.Proto), slog.Int("code", code), slog.Duration("duration", elapsed),
					slog.String("remote", r.RemoteAddr))
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// ProbeHandler serves the router's own endpoints, kept off the proxy port so that they never
// shadow a sandbox path. protect, when set, guards /metrics (--metrics-auth); the probes stay
// open for the kubelet.
func ProbeHandler(ready func() bool, m *Metrics, protect MetricsFilter) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeOK(w) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			writeDetail(w, http.StatusServiceUnavailable, "Sandbox cache not synced or shutting down.")
			return
		}
		writeOK(w)
	})
	if m != nil {
		h := m.Handler()
		if protect != nil {
			var err error
			if h, err = protect(h); err != nil {
				return nil, err
			}
		}
		mux.Handle("GET /metrics", h)
	}
	return mux, nil
}

// RESTConfig loads the API client configuration: --kubeconfig, else $KUBECONFIG or
// ~/.kube/config, else the in-cluster service account.
func (o *Options) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client config: %w", err)
	}
	cfg.QPS = float32(o.KubeAPIQPS)
	cfg.Burst = o.KubeAPIBurst
	cfg.UserAgent = "sandbox-router"
	return cfg, nil
}

// guard builds the proxy port's authentication and authorization from the flags; pods is the
// pod cache of --identify-pods, or nil.
func (o *Options) guard(cfg *rest.Config, pods access.PodIdentifier, log *slog.Logger) (GuardOptions, error) {
	var g GuardOptions
	switch o.AuthMode {
	case AuthModeToken:
		t, err := o.SharedToken()
		if err != nil {
			return g, err
		}
		if g.Authenticator, err = access.NewStaticTokenAuthenticator(t); err != nil {
			return g, err
		}
		g.Authorizer = access.NewSandboxAuthorizer(nil, 0, 0, 0, 1)
	case AuthModeTokenReview:
		authn, err := authnv1client.NewForConfig(cfg)
		if err != nil {
			return g, err
		}
		g.Authenticator = access.NewTokenReviewAuthenticator(&access.KubeTokenReviewer{Client: authn.TokenReviews(), Audiences: o.Audiences()},
			o.TokenReviewTTL, o.StaleAuthTTL, o.TokenReviewCacheSize)
		var reviewer access.SandboxReviewer
		if o.Authorize {
			authz, err := authzv1client.NewForConfig(cfg)
			if err != nil {
				return g, err
			}
			reviewer = &access.KubeSandboxReviewer{Client: authz.SubjectAccessReviews()}
			if pods != nil {
				reviewer = &access.HeldRightsReviewer{Client: authz.SubjectAccessReviews()}
				g.Pods, g.HeldRights = pods, true
			}
		} else {
			log.Warn("--authorize=false: any authenticated caller can use every sandbox")
		}
		var opts []access.AuthorizerOption
		if o.AuthzNamespaceWide {
			opts = append(opts, access.AskNamespaceWideFirst())
		}
		g.Authorizer = access.NewSandboxAuthorizer(reviewer, o.AuthzAllowTTL, o.AuthzDenyTTL, o.StaleAuthTTL, o.AuthzCacheSize, opts...)
	default:
		log.Warn("--auth-mode none: any client that can reach the router can use every sandbox; use tokenreview outside development")
		return g, nil
	}
	if o.ScopedTokenSecretFile != "" {
		signer, err := o.scopedSigner()
		if err != nil {
			return g, err
		}
		g.Authenticator = access.NewScopedTokenAuthenticator(signer, g.Authenticator)
	}
	return g, nil
}

// Run serves until ctx ends, then drains: /readyz fails first, in-flight requests get up to
// --shutdown-timeout. Upgraded (WebSocket) connections end with the process.
func Run(ctx context.Context, o Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := o.RESTConfig()
	if err != nil {
		return err
	}
	pods, podInformers, err := o.podCache(ctx, cfg, log)
	if err != nil {
		return err
	}
	var identifier access.PodIdentifier
	if pods != nil {
		identifier = pods
	}
	guard, err := o.guard(cfg, identifier, log)
	if err != nil {
		return err
	}
	cache := NewSandboxCache(o.AllowLoopbackPodIP)
	informers, err := cache.Attach(ctx, cfg, o.Namespace)
	if err != nil {
		return err
	}
	metrics := NewMetrics(cache)
	popts, err := o.proxyOptions(cfg, cache, metrics, log)
	if err != nil {
		return err
	}
	proxy := NewProxy(popts)
	defer proxy.Close()

	var stopping atomic.Bool
	ready := func() bool { return cache.HasSynced() && (pods == nil || pods.HasSynced()) && !stopping.Load() }
	handler := NewHandler(HandlerOptions{Proxy: proxy, Guard: guard, Metrics: metrics, Logger: log, AccessLog: o.AccessLog,
		TracerProvider: o.TracerProvider})
	servers, err := o.servers(handler, ready, metrics, cfg, log)
	if err != nil {
		return err
	}
	servers, closeE2B, err := o.withE2B(servers, cfg, popts, guard, metrics, log)
	if err != nil {
		return err
	}
	defer closeE2B()
	listeners, err := listen(servers)
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return informers.Start(gctx) })
	if podInformers != nil {
		g.Go(func() error { return podInformers.Start(gctx) })
	}
	g.Go(func() error {
		if toolscache.WaitForCacheSync(gctx.Done(), cache.HasSynced) {
			log.Info("sandbox cache synced", "sandboxes", cache.Len(), "namespace", o.Namespace)
		}
		return nil
	})
	for i, s := range servers {
		log.Info("serving", "addr", listeners[i].Addr().String())
		g.Go(func() error {
			if err := s.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serving %s: %w", s.Addr, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		stopping.Store(true)
		return shutdown(gctx, servers, o.ShutdownTimeout, log)
	})
	return g.Wait()
}

// podCache is --identify-pods' pod cache and its informers; nil, nil when off.
func (o *Options) podCache(ctx context.Context, cfg *rest.Config, log *slog.Logger) (*access.PodCache, crcache.Cache, error) {
	if !o.identifiesPods() {
		return nil, nil, nil
	}
	pods := access.NewPodCache(o.AllowLoopbackPodIP, o.ExcludedNamespaces()...)
	log.Info("pods of these namespaces must send a token: never named by their address", "namespaces", o.ExcludedNamespaces())
	informers, err := pods.Attach(ctx, cfg, o.Namespace)
	if err != nil {
		return nil, nil, err
	}
	return pods, informers, nil
}

// proxyOptions are the proxy's settings from the flags, with a waker on cfg when --wake. The
// port rule is always on.
func (o *Options) proxyOptions(cfg *rest.Config, res Resolver, m *Metrics, log *slog.Logger) (ProxyOptions, error) {
	popts := ProxyOptions{Resolver: res, Metrics: m, Logger: log,
		MaxTimeout: o.ProxyTimeout, DialTimeout: o.DialTimeout, ResponseHeaderTimeout: o.ResponseHeaderTimeout, DialRetries: o.DialRetries,
		DeclaredPortsOnly: true, AllowedPorts: o.AllowedPorts, UnclaimedWait: o.UnclaimedWait, WakeTimeout: o.WakeTimeout,
		TracerProvider: o.TracerProvider}
	if o.Wake {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return popts, err
		}
		popts.Waker = &ScaleWaker{Client: dyn}
	}
	return popts, nil
}

// servers are the proxy port's server and, with --probe-listen, the probe port's (its /metrics
// behind --metrics-auth's filter, which asks the API server at cfg).
func (o *Options) servers(handler http.Handler, ready func() bool, metrics *Metrics, cfg *rest.Config, log *slog.Logger) ([]*http.Server, error) {
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	servers := []*http.Server{o.proxyServer(o.Listen, handler, log)}
	if o.ProbeListen != "" {
		protect, err := o.MetricsProtector(cfg, log)
		if err != nil {
			return nil, err
		}
		probes, err := ProbeHandler(ready, metrics, protect)
		if err != nil {
			return nil, err
		}
		servers = append(servers, &http.Server{Addr: o.ProbeListen, Handler: probes,
			ReadHeaderTimeout: 5 * time.Second, ErrorLog: errLog})
	}
	return servers, nil
}

// proxyServer serves a port that proxies to sandboxes: HTTP/1.1 and h2c, and no
// ReadTimeout/WriteTimeout, since exec streams and WebSockets last as long as they last.
func (o *Options) proxyServer(addr string, handler http.Handler, log *slog.Logger) *http.Server {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		Protocols:         &protos,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// listen opens every server's port before any serves, so that a taken port fails the start,
// not a goroutine later.
func listen(servers []*http.Server) ([]net.Listener, error) {
	listeners := make([]net.Listener, len(servers))
	for i, s := range servers {
		var err error
		if listeners[i], err = net.Listen("tcp", s.Addr); err != nil {
			for _, l := range listeners[:i] {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listening on %s: %w", s.Addr, err)
		}
	}
	return listeners, nil
}

// shutdown drains the servers for up to timeout; a server that does not drain in time is closed.
func shutdown(ctx context.Context, servers []*http.Server, timeout time.Duration, log *slog.Logger) error {
	log.Info("shutting down", "timeout", timeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var errs []error
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("shutting down %s: %w", s.Addr, err))
			_ = s.Close()
		}
	}
	return errors.Join(errs...)
}
