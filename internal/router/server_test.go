package router

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
)

func TestHealthShortcut(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "sandbox "+r.URL.Path)
	}))
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}})
	client := h1Client(t)
	tests := []struct {
		name     string
		method   string
		id       string
		wantCode int
		wantBody string
	}{
		{"gateway health check", "GET", "", 200, `{"status":"ok"}` + "\n"},
		{"head health check", "HEAD", "", 200, ""},
		{"sandbox's own /healthz", "GET", "sb", 200, "sandbox /healthz"},
		{"post is not a health check", "POST", "", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Do(routed(t, tt.method, router.URL+"/healthz", tt.id, port, nil))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tt.wantCode || (tt.wantBody != "" && body != tt.wantBody) {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestProbeEndpoints(t *testing.T) {
	var mu sync.Mutex
	ready := false
	m := NewMetrics(inventory{"team-a": 3})
	probes, err := ProbeHandler(func() bool { mu.Lock(); defer mu.Unlock(); return ready }, m, nil) // --metrics-auth=false
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(probes)
	t.Cleanup(srv.Close)
	client := h1Client(t)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Fatalf("readyz before sync = %d", code)
	}
	mu.Lock()
	ready = true
	mu.Unlock()
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz after sync = %d", code)
	}
	m.requests.WithLabelValues("GET", "200", "team-a").Inc()
	m.upstreamError("team-a", upstreamDial)
	m.duration.WithLabelValues("GET", "200", "team-a").Observe(0.001)
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("metrics = %d", code)
	}
	for _, want := range []string{
		`sandbox_router_requests_total{code="200",method="GET",sandbox_namespace="team-a"} 1`,
		`sandbox_router_upstream_errors_total{reason="dial",sandbox_namespace="team-a"} 1`,
		`sandbox_router_build_info{`,
		`sandbox_router_cache_sandboxes 3`,
		`sandbox_router_request_duration_seconds_bucket`,
		`sandbox_router_inflight_requests 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get("/other"); code != 404 {
		t.Fatalf("unknown path = %d", code)
	}
}

// The access log names the route and status and never carries the caller's token.
func TestAccessLogOmitsToken(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	a, _ := access.NewStaticTokenAuthenticator("very-secret-token")
	h := NewHandler(HandlerOptions{
		Proxy:     NewProxy(ProxyOptions{Resolver: &stubResolver{}}),
		Guard:     GuardOptions{Authenticator: a},
		Logger:    log,
		AccessLog: true,
	})
	for _, tok := range []string{"very-secret-token", "wrong-secret-token"} {
		req := httptest.NewRequest("GET", "/p?q=1", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(HeaderSandboxID, "missing")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if strings.Contains(out, "secret-token") {
		t.Fatalf("token logged: %s", out)
	}
	for _, want := range []string{`"sandbox":"missing"`, `"code":404`, `"code":401`, `"path":"/p"`} {
		if !strings.Contains(out, want) {
			t.Errorf("access log lacks %s: %s", want, out)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestOptions(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o := DefaultOptions()
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--namespace", "team", "--auth-mode", "tokenreview", "--tokenreview-ttl", "5s",
		"--tokenreview-audiences", "a, b,,", "--listen", ":9000"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Namespace != "team" || o.TokenReviewTTL != 5*time.Second || o.Listen != ":9000" || o.ProbeListen != ":8081" {
		t.Fatalf("parsed %+v", o)
	}
	if got := o.Audiences(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("audiences = %q", got)
	}
	bad := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"unknown auth mode", func(o *Options) { o.AuthMode = "allow-all" }, "--auth-mode must be"},
		{"no listen address", func(o *Options) { o.Listen = "" }, "--listen"},
		{"bad namespace", func(o *Options) { o.Namespace = "Bad_NS" }, "--namespace"},
		{"empty review cache", func(o *Options) { o.TokenReviewCacheSize = 0 }, "--tokenreview-cache-size"},
		{"negative unclaimed wait", func(o *Options) { o.UnclaimedWait = -time.Second }, "--unclaimed-wait"},
		{"no proxy timeout", func(o *Options) { o.ProxyTimeout = 0 }, "--proxy-timeout"},
		{"no auth without the insecure flag", func(o *Options) { o.AuthMode = AuthModeNone; o.Listen = "127.0.0.1:8080" }, "--insecure-no-auth"},
		{"no auth beyond loopback", func(o *Options) { o.AuthMode = AuthModeNone; o.InsecureNoAuth = true }, "loopback only"},
		{"no auth on a pod address", func(o *Options) { o.AuthMode = AuthModeNone; o.InsecureNoAuth = true; o.Listen = "10.0.0.1:8080" }, "loopback only"},
		{"anonymous callers", func(o *Options) { o.AllowAnonymous = true }, "never authorizes system:anonymous"},
		{"bad excluded namespace", func(o *Options) { o.IdentifyPodsExcludeNamespaces = "kube-system,Bad_NS" }, "--identify-pods-exclude-namespaces"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
}

// The binary's defaults are the chart's: every request authenticated and authorized, tokenless
// in-cluster callers named by their pod. Without authorization pods are never identified (every
// pod would get in).
func TestDefaultsAuthorizeEveryRequest(t *testing.T) {
	o := DefaultOptions()
	if o.AuthMode != AuthModeTokenReview || !o.Authorize || !o.identifiesPods() || !o.MetricsAuth {
		t.Fatalf("defaults: auth %q, authorize %v, identify pods %v, metrics auth %v; want tokenreview, true, true, true",
			o.AuthMode, o.Authorize, o.identifiesPods(), o.MetricsAuth)
	}
	o.Authorize = false
	if o.identifiesPods() {
		t.Error("pods identified with --authorize=false: every pod would reach every sandbox")
	}
	for _, listen := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080"} {
		o := DefaultOptions()
		o.AuthMode, o.InsecureNoAuth, o.Listen = AuthModeNone, true, listen
		if err := o.Validate(); err != nil {
			t.Errorf("--auth-mode none --insecure-no-auth --listen %s: %v, want accepted", listen, err)
		}
	}
}

// Whose pods are never named by their address: the flag's namespaces (kube-system, kube-public,
// kube-node-lease by default) and the router's own, except where the router serves its own
// namespace alone (a tenant router: its callers are that namespace's pods).
func TestIdentifyPodsExcludedNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		own, namespace string
		want           []string
	}{
		{"defaults, outside a pod", nil, "", "", []string{"kube-system", "kube-public", "kube-node-lease"}},
		{"defaults, in agent-sandbox-system", nil, "agent-sandbox-system", "", []string{"kube-system", "kube-public", "kube-node-lease", "agent-sandbox-system"}},
		{"a router of one other namespace", nil, "agent-sandbox-system", "team-a", []string{"kube-system", "kube-public", "kube-node-lease", "agent-sandbox-system"}},
		{"a tenant router serving its own namespace", nil, "team-a", "team-a", []string{"kube-system", "kube-public", "kube-node-lease"}},
		{"the flag replaces the list, the own namespace stays", []string{"--identify-pods-exclude-namespaces", " monitoring,, kube-system "}, "agent-sandbox-system", "",
			[]string{"monitoring", "kube-system", "agent-sandbox-system"}},
		{"the own namespace listed once", []string{"--identify-pods-exclude-namespaces", "agent-sandbox-system"}, "agent-sandbox-system", "", []string{"agent-sandbox-system"}},
		{"empty flag: the own namespace alone", []string{"--identify-pods-exclude-namespaces", ""}, "agent-sandbox-system", "", []string{"agent-sandbox-system"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o := DefaultOptions()
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.OwnNamespace, o.Namespace = tc.own, tc.namespace
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := o.ExcludedNamespaces(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("excluded = %q, want %q", got, tc.want)
			}
		})
	}
}

// The router's own namespace comes from $POD_NAMESPACE (the chart sets it from the Downward API).
func TestPodNamespaceFromTheEnvironment(t *testing.T) {
	t.Setenv("POD_NAMESPACE", " agent-sandbox-system\n")
	if got := PodNamespace(); got != "agent-sandbox-system" {
		t.Errorf("PodNamespace() = %q, want agent-sandbox-system", got)
	}
}

func TestAllowedPortsFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []uint16
		wantErr bool
	}{
		{"default: sandboxd's HTTP and gRPC ports", nil, []uint16{8888, 9090}, false},
		{"a list replaces the default", []string{"--allowed-ports", "3000"}, []uint16{3000}, false},
		{"sorted, without duplicates, blanks ignored", []string{"--allowed-ports", "9090, 80,,9090"}, []uint16{80, 9090}, false},
		{"empty: declared ports only", []string{"--allowed-ports="}, nil, false},
		{"port 0", []string{"--allowed-ports", "0"}, nil, true},
		{"port 65536", []string{"--allowed-ports", "8888,65536"}, nil, true},
		{"not a number", []string{"--allowed-ports", "http"}, nil, true},
		{"a range", []string{"--allowed-ports", "8000-9000"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o := DefaultOptions()
			o.BindFlags(fs)
			err := fs.Parse(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parse error %v, want error %v", err, tt.wantErr)
			}
			if err == nil && !slices.Equal(o.AllowedPorts, tt.want) {
				t.Fatalf("allowed ports %v, want %v", o.AllowedPorts, tt.want)
			}
		})
	}
}

func TestProxyTimeoutFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want time.Duration
	}{
		{"default: upstream's PROXY_TIMEOUT_SECONDS", nil, 180 * time.Second},
		{"set", []string{"--proxy-timeout", "10m"}, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o := DefaultOptions()
			o.BindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			po, err := o.proxyOptions(&rest.Config{Host: "https://127.0.0.1:1"}, &stubResolver{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := po.MaxTimeout; got != tt.want {
				t.Errorf("the proxy's MaxTimeout = %v, want %v", got, tt.want)
			}
			// Each router's own setting: nothing of it outlives the Options it came from.
			if got := DefaultOptions().ProxyTimeout; got != DefaultProxyTimeout {
				t.Errorf("DefaultOptions().ProxyTimeout = %v after parsing, want %v", got, DefaultProxyTimeout)
			}
		})
	}
}

// The router always runs with the port rule; the flags add to it but cannot turn it off.
func TestRunsWithThePortRule(t *testing.T) {
	o := DefaultOptions()
	o.AllowedPorts = PortList{3000}
	o.UnclaimedWait = 5 * time.Second
	po, err := o.proxyOptions(&rest.Config{Host: "https://127.0.0.1:1"}, &stubResolver{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !po.DeclaredPortsOnly || !slices.Equal(po.AllowedPorts, []uint16{3000}) || po.UnclaimedWait != 5*time.Second {
		t.Fatalf("proxy options %+v, want the port rule on, allowlist [3000] and a 5s unclaimed wait", po)
	}
	if got := DefaultOptions().UnclaimedWait; got != 2*time.Second {
		t.Fatalf("default unclaimed wait %v, want 2s", got)
	}
}

func TestSharedToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvAuthToken, "from-env")
	tests := []struct {
		file    string
		want    string
		wantErr bool
	}{
		{file, "from-file", false},
		{"", "from-env", false},
		{empty, "", true},
		{filepath.Join(dir, "absent"), "", true},
	}
	for _, tt := range tests {
		o := Options{AuthTokenFile: tt.file}
		got, err := o.SharedToken()
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("file %q: got %q, %v", tt.file, got, err)
		}
	}
	t.Setenv(EnvAuthToken, "")
	if _, err := (&Options{}).SharedToken(); err == nil {
		t.Error("no token source accepted")
	}
}
