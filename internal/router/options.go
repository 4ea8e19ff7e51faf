package router

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// Auth modes of the proxy port.
const (
	AuthModeNone        = "none"
	AuthModeToken       = "token"
	AuthModeTokenReview = "tokenreview"
)

// EnvAuthToken is read for the shared token when --auth-token-file is not set.
const EnvAuthToken = "ROUTER_AUTH_TOKEN"

// DefaultAllowedPorts are the ports sandboxd serves by default, which clients use whether or not
// a Sandbox declares them: 8888, the legacy runtime API (upstream's clients' default
// X-Sandbox-Port), and 9090, its gRPC ProcessService.
var DefaultAllowedPorts = []uint16{DefaultPort, 9090}

// Options are the router's settings; BindFlags maps them to command-line flags.
type Options struct {
	Listen      string
	ProbeListen string

	Kubeconfig         string
	Namespace          string
	KubeAPIQPS         float64
	KubeAPIBurst       int
	AllowLoopbackPodIP bool

	AuthMode             string
	AuthTokenFile        string
	TokenReviewTTL       time.Duration
	TokenReviewCacheSize int
	TokenReviewAudiences string // comma-separated

	// Authorize asks the API server (SubjectAccessReview) per caller and sandbox, in tokenreview mode.
	Authorize      bool
	AllowAnonymous bool // removed; kept so that setting it fails with a reason
	InsecureNoAuth bool
	// IdentifyPods names tokenless callers by their source pod and accepts the rights they
	// already hold (access.HeldRightsReviewer), in tokenreview mode with Authorize.
	IdentifyPods bool
	// IdentifyPodsExcludeNamespaces (comma-separated): pods of these namespaces never get a
	// tokenless identity; the router's own namespace (OwnNamespace) is added unless it is the
	// --namespace it serves (a tenant router, whose callers live there).
	IdentifyPodsExcludeNamespaces string
	// OwnNamespace is the namespace of the router's pod (not a flag: cmd/router reads it with
	// PodNamespace); "" outside a pod.
	OwnNamespace   string
	AuthzAllowTTL  time.Duration
	AuthzDenyTTL   time.Duration
	AuthzCacheSize int
	// AuthzNamespaceWide asks first whether a caller may reach every Sandbox of the namespace
	// (access.AskNamespaceWideFirst).
	AuthzNamespaceWide bool
	// StaleAuthTTL is how long a token's user and an allowed access stay usable after their
	// last successful review, only while the API server cannot answer (lastKnown).
	StaleAuthTTL time.Duration
	// ScopedTokenSecretFile enables tokens scoped to one Sandbox, signed with this secret.
	ScopedTokenSecretFile string

	// E2BListen serves E2B's SDKs (their REST API and envd through the router) on this
	// address; "" does not. It needs ScopedTokenSecretFile: envd access tokens are scoped tokens.
	E2BListen string
	// E2BDomain is the domain the control plane reports with each sandbox ("" reports none).
	E2BDomain string

	// AllowedPorts are routed to on every Sandbox; any other port must be declared by one of
	// the Sandbox's containers.
	AllowedPorts PortList
	// UnclaimedWait is how long a request to an unclaimed warm pool member waits for the
	// router's cache to see a claim take it.
	UnclaimedWait time.Duration
	// Wake turns on wake on request (resuming paused Sandboxes that ask for it); WakeTimeout
	// is how long such a request waits for the Sandbox to be ready.
	Wake        bool
	WakeTimeout time.Duration

	// ProxyTimeout caps a request's X-Sandbox-Timeout.
	ProxyTimeout          time.Duration
	DialTimeout           time.Duration
	ResponseHeaderTimeout time.Duration
	DialRetries           int
	ReadHeaderTimeout     time.Duration
	IdleTimeout           time.Duration
	MaxHeaderBytes        int
	ShutdownTimeout       time.Duration

	AccessLog bool
	// MetricsAuth serves /metrics only to callers the API server allows get on the non-resource
	// URL /metrics (metricsauth.go); false: to anyone who reaches the probe port.
	MetricsAuth bool
	// TracerProvider is not a flag: cmd/router sets it from the OTEL_* environment
	// (internal/tracing); nil traces nothing.
	TracerProvider trace.TracerProvider
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		Listen:                        ":8080",
		ProbeListen:                   ":8081",
		KubeAPIQPS:                    50,
		KubeAPIBurst:                  100,
		AuthMode:                      AuthModeTokenReview,
		IdentifyPods:                  true,
		IdentifyPodsExcludeNamespaces: strings.Join(access.DefaultExcludedNamespaces, ","),
		TokenReviewTTL:                30 * time.Second,
		TokenReviewCacheSize:          2048,
		Authorize:                     true,
		AuthzAllowTTL:                 10 * time.Second,
		AuthzDenyTTL:                  2 * time.Second,
		AuthzNamespaceWide:            true,
		AuthzCacheSize:                4096,
		StaleAuthTTL:                  5 * time.Minute,
		AllowedPorts:                  slices.Clone(DefaultAllowedPorts),
		UnclaimedWait:                 2 * time.Second,
		Wake:                          true,
		WakeTimeout:                   DefaultWakeTimeout,
		ProxyTimeout:                  DefaultProxyTimeout,
		DialTimeout:                   5 * time.Second,
		DialRetries:                   2,
		ReadHeaderTimeout:             10 * time.Second,
		IdleTimeout:                   120 * time.Second,
		MaxHeaderBytes:                1 << 20,
		ShutdownTimeout:               30 * time.Second,
		AccessLog:                     true,
		MetricsAuth:                   true,
		ResponseHeaderTimeout:         0,
	}
}

// BindFlags registers every option on fs, with o's current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", o.Listen, "Address of the proxy port (HTTP/1.1 and h2c).")
	fs.StringVar(&o.ProbeListen, "probe-listen", o.ProbeListen, "Address serving /healthz, /readyz and /metrics; empty disables it.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig; default: $KUBECONFIG, ~/.kube/config, then in-cluster.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Only route to Sandboxes in this namespace; empty watches all namespaces.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client-side QPS limit towards the API server (TokenReviews, the watch).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst towards the API server.")
	fs.BoolVar(&o.AllowLoopbackPodIP, "allow-loopback-pod-ip", o.AllowLoopbackPodIP, "Route to loopback pod IPs (single-machine tests only).")
	fs.StringVar(&o.AuthMode, "auth-mode", o.AuthMode, "Authentication of callers: none, token (shared bearer token) or tokenreview (Kubernetes TokenReview).")
	fs.StringVar(&o.AuthTokenFile, "auth-token-file", o.AuthTokenFile, "File holding the shared token for --auth-mode token; default: $"+EnvAuthToken+".")
	fs.DurationVar(&o.TokenReviewTTL, "tokenreview-ttl", o.TokenReviewTTL, "How long a TokenReview outcome is cached.")
	fs.IntVar(&o.TokenReviewCacheSize, "tokenreview-cache-size", o.TokenReviewCacheSize, "Most TokenReview outcomes cached.")
	fs.StringVar(&o.TokenReviewAudiences, "tokenreview-audiences", o.TokenReviewAudiences, "Comma-separated audiences a token must be valid for; empty: the API server's.")
	fs.BoolVar(&o.Authorize, "authorize", o.Authorize, "With --auth-mode tokenreview, let a caller reach a sandbox only when the API server allows it "+access.ProxyVerb+" on "+access.ProxyResource+"/"+access.ProxySubresource+" of that Sandbox (SubjectAccessReview).")
	fs.BoolVar(&o.AllowAnonymous, "allow-anonymous", o.AllowAnonymous, "Removed: the router never authorizes system:anonymous. Setting it is an error.")
	fs.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", o.InsecureNoAuth, "Allow --auth-mode none: every client that reaches the router may use every sandbox. Only with a loopback --listen.")
	fs.BoolVar(&o.IdentifyPods, "identify-pods", o.IdentifyPods, "With --auth-mode tokenreview and --authorize, identify a request without a token as the ServiceAccount of the pod its connection comes from (source IP, from a pod watch; host-network pods and unknown IPs are refused), and let any caller in that may create sandboxes/proxy, patch or update the Sandbox, or create pods/portforward on its pod. Trust it only on a CNI that prevents source IP spoofing; ignored in the other modes.")
	fs.StringVar(&o.IdentifyPodsExcludeNamespaces, "identify-pods-exclude-namespaces", o.IdentifyPodsExcludeNamespaces, "Comma-separated namespaces whose pods --identify-pods never names: a request of theirs without a token gets a 401 (send a token). The router's own namespace ($POD_NAMESPACE, else its service account's) is always added, unless it is the --namespace served: the system's pods hold rights on every Sandbox, and whoever spoofed their address would hold them too.")
	fs.DurationVar(&o.AuthzAllowTTL, "authz-allow-ttl", o.AuthzAllowTTL, "How long an allowed SubjectAccessReview is cached.")
	fs.DurationVar(&o.AuthzDenyTTL, "authz-deny-ttl", o.AuthzDenyTTL, "How long a denied SubjectAccessReview is cached.")
	fs.BoolVar(&o.AuthzNamespaceWide, "authz-namespace-wide", o.AuthzNamespaceWide, "Ask first whether a caller may reach every Sandbox of the namespace (a SubjectAccessReview with no name: an RBAC rule without resourceNames) and cache that per namespace, so the first request to each new Sandbox there needs no review of its own; false: one review per Sandbox (for an authorizer that answers a review with no name differently).")
	fs.IntVar(&o.AuthzCacheSize, "authz-cache-size", o.AuthzCacheSize, "Most SubjectAccessReview outcomes cached.")
	fs.DurationVar(&o.StaleAuthTTL, "stale-auth-ttl", o.StaleAuthTTL, "While the API server cannot answer (kube-apiserver or etcd restarting, overloaded), keep accepting a token whose review succeeded and an access that was allowed within this long; refusals are never kept; an unknown caller waits up to 5s for the API server, then fails closed. 0: fail every request whose cache entry expired.")
	fs.StringVar(&o.ScopedTokenSecretFile, "scoped-token-secret-file", o.ScopedTokenSecretFile, "File holding the secret (at least 32 bytes) that signs tokens scoped to one Sandbox; such tokens are accepted in token and tokenreview modes.")
	fs.StringVar(&o.E2BListen, "e2b-listen", o.E2BListen, "Address serving E2B's SDKs: their REST API (API keys are ServiceAccount tokens) and, for requests with E2b-Sandbox-Id, envd in the sandbox (port 49983 is routed to there as sandboxd's); empty disables it. Needs --scoped-token-secret-file.")
	fs.StringVar(&o.E2BDomain, "e2b-domain", o.E2BDomain, "Domain the E2B control plane reports with each sandbox; empty reports none.")
	fs.Var(&o.AllowedPorts, "allowed-ports", "Comma-separated `ports` routed to on every Sandbox; any other port must be declared by one of the Sandbox's containers (spec.podTemplate.spec.containers[*].ports). Empty: declared ports only.")
	fs.BoolVar(&o.Wake, "wake", o.Wake, "Resume a paused Sandbox that wakes on request (agents.x-k8s.io/wake-on-request, or an idle timeout) when an authorized request comes for it; needs patch on sandboxes/scale.")
	fs.DurationVar(&o.WakeTimeout, "wake-timeout", o.WakeTimeout, "How long a request for a Sandbox it woke waits for it to be ready before a 503 with Retry-After (X-Sandbox-Wake-Timeout overrides it per request, up to 10m).")
	fs.DurationVar(&o.UnclaimedWait, "unclaimed-wait", o.UnclaimedWait, "How long a request to an unclaimed warm pool member waits for the cache to see a claim take it (a client can act on the claim's status before the router's watch delivers the adoption), before the 404; 0: no wait.")
	fs.DurationVar(&o.ProxyTimeout, "proxy-timeout", o.ProxyTimeout, "Cap of a request's X-Sandbox-Timeout (seconds the sandbox may stay silent before a 504), as upstream's PROXY_TIMEOUT_SECONDS.")
	fs.DurationVar(&o.DialTimeout, "dial-timeout", o.DialTimeout, "Timeout to connect to a sandbox pod.")
	fs.DurationVar(&o.ResponseHeaderTimeout, "response-header-timeout", o.ResponseHeaderTimeout, "Longest wait for a sandbox's response headers (504 after); 0: no limit.")
	fs.IntVar(&o.DialRetries, "dial-retries", o.DialRetries, "Retries after a refused connection, for requests without a body; 0 disables.")
	fs.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", o.ReadHeaderTimeout, "Longest time a client may take to send request headers.")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "Idle keep-alive connections from clients are closed after this.")
	fs.IntVar(&o.MaxHeaderBytes, "max-header-bytes", o.MaxHeaderBytes, "Largest request header block accepted.")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "On SIGTERM, how long in-flight requests may take to finish.")
	fs.BoolVar(&o.AccessLog, "access-log", o.AccessLog, "Log one line per proxied request.")
	fs.BoolVar(&o.MetricsAuth, "metrics-auth", o.MetricsAuth, "Serve /metrics only to callers the API server authenticates (TokenReview) and allows get on the non-resource URL /metrics (SubjectAccessReview; the ClusterRole agent-sandbox-metrics-reader grants it); /healthz and /readyz stay open. false: to anyone who reaches the probe port (local debugging).")
}

// Validate reports the first inconsistent setting.
func (o *Options) Validate() error {
	switch o.AuthMode {
	case AuthModeNone, AuthModeToken, AuthModeTokenReview:
	default:
		return fmt.Errorf("--auth-mode must be none, token or tokenreview, not %q", o.AuthMode)
	}
	if o.Listen == "" {
		return errors.New("--listen must not be empty")
	}
	if o.Namespace != "" && !isDNS1123Label(o.Namespace) {
		return fmt.Errorf("--namespace %q is not a valid namespace name", o.Namespace)
	}
	for _, ns := range splitList(o.IdentifyPodsExcludeNamespaces) {
		if !isDNS1123Label(ns) {
			return fmt.Errorf("--identify-pods-exclude-namespaces: %q is not a valid namespace name", ns)
		}
	}
	if o.AuthMode == AuthModeTokenReview && o.TokenReviewCacheSize < 1 {
		return errors.New("--tokenreview-cache-size must be at least 1")
	}
	if o.AllowAnonymous {
		return errors.New("--allow-anonymous was removed: the router never authorizes system:anonymous (a binding for it opens a sandbox to every network peer); " +
			"in-cluster clients without a token are named by their pod (--identify-pods), others send a bearer token")
	}
	if o.AuthMode == AuthModeNone {
		if !o.InsecureNoAuth {
			return errors.New("--auth-mode none lets every client that reaches the router use every sandbox: it needs --insecure-no-auth, and a loopback --listen")
		}
		if !isLoopbackListen(o.Listen) {
			return fmt.Errorf("--auth-mode none listens on loopback only (127.0.0.1, [::1] or localhost), not %q", o.Listen)
		}
	}
	if o.ScopedTokenSecretFile != "" && o.AuthMode == AuthModeNone {
		return errors.New("--scoped-token-secret-file needs --auth-mode token or tokenreview")
	}
	if o.E2BListen != "" && o.ScopedTokenSecretFile == "" {
		return errors.New("--e2b-listen needs --scoped-token-secret-file: the envd access tokens it hands out are scoped tokens")
	}
	if o.AuthMode == AuthModeTokenReview && o.Authorize && o.AuthzCacheSize < 1 {
		return errors.New("--authz-cache-size must be at least 1")
	}
	if o.WakeTimeout <= 0 {
		return errors.New("--wake-timeout must be positive")
	}
	if o.ProxyTimeout <= 0 {
		return errors.New("--proxy-timeout must be positive")
	}
	if o.UnclaimedWait < 0 {
		return errors.New("--unclaimed-wait must not be negative")
	}
	return nil
}

// Audiences splits --tokenreview-audiences.
func (o *Options) Audiences() []string { return splitList(o.TokenReviewAudiences) }

// ExcludedNamespaces are the namespaces whose pods --identify-pods never names: the flag's, and
// the router's own namespace unless it is the one namespace the router serves.
func (o *Options) ExcludedNamespaces() []string {
	out := splitList(o.IdentifyPodsExcludeNamespaces)
	if o.OwnNamespace != "" && o.OwnNamespace != o.Namespace && !slices.Contains(out, o.OwnNamespace) {
		out = append(out, o.OwnNamespace)
	}
	return out
}

// serviceAccountNamespaceFile holds the namespace of the pod's service account, which is the
// pod's own.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// PodNamespace is the namespace of the pod the router runs in: $POD_NAMESPACE (the Downward
// API), else the service account's namespace file; "" outside a pod.
func PodNamespace() string {
	if ns := strings.TrimSpace(os.Getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	b, err := os.ReadFile(serviceAccountNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// SharedToken reads the token of --auth-mode token: the file when set, else the environment.
// Surrounding whitespace (a trailing newline in a Secret file) is dropped.
func (o *Options) SharedToken() (string, error) {
	if o.AuthTokenFile != "" {
		b, err := os.ReadFile(o.AuthTokenFile)
		if err != nil {
			return "", fmt.Errorf("reading --auth-token-file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", errors.New("--auth-token-file is empty")
		}
		return t, nil
	}
	t := strings.TrimSpace(os.Getenv(EnvAuthToken))
	if t == "" {
		return "", errors.New("--auth-mode token needs --auth-token-file or $" + EnvAuthToken)
	}
	return t, nil
}

// scopedSigner reads --scoped-token-secret-file. The secret is used as bytes, as written (a
// trailing newline from `echo` would change it, so surrounding whitespace is dropped first).
func (o *Options) scopedSigner() (*scopedtoken.Signer, error) {
	b, err := os.ReadFile(o.ScopedTokenSecretFile)
	if err != nil {
		return nil, fmt.Errorf("reading --scoped-token-secret-file: %w", err)
	}
	s, err := scopedtoken.NewSigner([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		return nil, fmt.Errorf("--scoped-token-secret-file: %w", err)
	}
	return s, nil
}

// PortList is the value of --allowed-ports: comma-separated ports, 1..65535, sorted without
// duplicates. Setting it replaces the default.
type PortList []uint16

func (l *PortList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

// Set implements flag.Value.
func (l *PortList) Set(v string) error {
	var ports []uint16
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, ok := parsePort(f)
		if !ok {
			return fmt.Errorf("%q is not a port (1..65535)", f)
		}
		ports = append(ports, p)
	}
	slices.Sort(ports)
	*l = slices.Compact(ports)
	return nil
}

// identifiesPods: --identify-pods applies where RBAC decides (tokenreview with --authorize);
// without authorization it would let every pod in.
func (o *Options) identifiesPods() bool {
	return o.IdentifyPods && o.AuthMode == AuthModeTokenReview && o.Authorize
}

// isLoopbackListen reports whether a listen address binds loopback only.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
