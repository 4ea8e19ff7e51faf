package sdk

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/storageversion"
)

// Mode selects how the SDK reaches sandboxd inside a sandbox.
type Mode string

const (
	// ModeAuto picks ModeRouter when Options.RouterURL is set, else
	// ModeDirect when running inside a pod, else ModePortForward.
	ModeAuto Mode = "auto"
	// ModeRouter sends every request to the sandbox-router at
	// Options.RouterURL with the X-Sandbox-ID, X-Sandbox-Namespace and
	// X-Sandbox-Port headers (and Options.RouterToken as a bearer token).
	ModeRouter Mode = "router"
	// ModeDirect talks to http://<pod IP>:<SandboxPort>; it needs to run
	// where pod IPs are reachable (inside the cluster).
	ModeDirect Mode = "direct"
	// ModePortForward opens a port-forward through the kube-apiserver (as
	// kubectl port-forward does) to the sandbox pod, one per Sandbox handle,
	// released by Sandbox.Close. It works from a laptop with a kubeconfig.
	ModePortForward Mode = "port-forward"
	// ModeExec runs commands through the Kubernetes exec API (as kubectl exec
	// does) and moves files with cat and tar, for images without sandboxd.
	// Background processes and file watches are not available.
	ModeExec Mode = "exec"
)

// Modes lists the valid modes, for flag help.
var Modes = []Mode{ModeAuto, ModeRouter, ModeDirect, ModePortForward, ModeExec}

// ParseMode validates a mode name; "" means ModeAuto.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return ModeAuto, nil
	}
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown mode %q (valid: %s)", s, strings.Join(names, ", "))
}

// Defaults.
const (
	DefaultReadyTimeout = 2 * time.Minute
	DefaultSandboxPort  = 8888
)

// Options configure a Client. The zero value works: it loads the Kubernetes
// configuration the way kubectl does and picks the connection mode itself.
type Options struct {
	// Kubeconfig is the path of a kubeconfig file. Empty: $KUBECONFIG, then
	// ~/.kube/config, then the in-cluster service account.
	Kubeconfig string
	// Context is the kubeconfig context to use (default: the current one).
	Context string
	// Namespace of the claims and sandboxes. Empty: the context's
	// namespace, the pod's namespace in-cluster, else "default".
	Namespace string
	// RESTConfig, when set, is used instead of loading a kubeconfig.
	RESTConfig *rest.Config

	// Mode is how sandboxd is reached (default ModeAuto).
	Mode Mode
	// RouterURL is the sandbox-router's base URL, such as
	// http://sandbox-router-svc.agent-sandbox-system.svc:8080.
	RouterURL string
	// RouterToken is sent as "Authorization: Bearer <token>" to the router.
	RouterToken string
	// SandboxToken is sent as "Authorization: Bearer <token>" to sandboxd in
	// ModeDirect and ModePortForward, when sandboxd runs with a token.
	SandboxToken string
	// SandboxPort is sandboxd's port in the pod (default 8888).
	SandboxPort int
	// DisableHTTP2 makes the HTTP modes speak HTTP/1.1 only. By default
	// plain-HTTP endpoints are spoken to with HTTP/2 over cleartext (h2c,
	// prior knowledge), which sandboxd and the router both accept.
	DisableHTTP2 bool
	// HTTPTransport, when set, replaces the SDK's HTTP transport (for
	// custom TLS towards an https router, or tests).
	HTTPTransport http.RoundTripper

	// ReadyTimeout bounds how long Create, GetOrCreate, Resume and
	// CreateSandbox wait for the sandbox to be ready (default 2m).
	ReadyTimeout time.Duration

	// Container is the container ModeExec runs in (default: the pod's
	// kubectl.kubernetes.io/default-container annotation, else the first).
	Container string
	// ExecRoot, in ModeExec, is the directory relative file paths and the
	// working directory are taken from (default: the container's working
	// directory). sandboxd roots paths at its own root, /workspace.
	ExecRoot string

	// UserAgent is sent to the API server and sandboxd.
	UserAgent string
}

// Client creates, finds and deletes sandboxes, and hands out Sandbox handles
// to work in them. It is safe for concurrent use.
type Client struct {
	opts      Options
	ns        string
	mode      Mode
	cfg       *rest.Config
	kube      client.WithWatch
	inCluster bool

	core kubernetes.Interface

	http *httpClients
}

// Scheme returns a runtime.Scheme with the agent-sandbox kinds registered.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := agentsv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := extv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	// The claims' wire form (storageversion.Claims).
	if err := extv1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// New builds a Client. It does not contact the cluster; use CheckCluster to
// validate the installation at startup.
func New(o Options) (*Client, error) {
	mode, err := ParseMode(string(o.Mode))
	if err != nil {
		return nil, err
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.SandboxPort == 0 {
		o.SandboxPort = DefaultSandboxPort
	}
	if o.SandboxPort < 1 || o.SandboxPort > 65535 {
		return nil, fmt.Errorf("sandbox port %d out of range", o.SandboxPort)
	}
	if o.UserAgent == "" {
		o.UserAgent = "agent-sandbox-go-sdk"
	}
	o.RouterURL = strings.TrimRight(o.RouterURL, "/")
	if o.RouterURL != "" && !strings.HasPrefix(o.RouterURL, "http://") && !strings.HasPrefix(o.RouterURL, "https://") {
		return nil, fmt.Errorf("router URL %q must start with http:// or https://", o.RouterURL)
	}

	cfg, ns, err := loadConfig(o)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, ns: ns, cfg: cfg, inCluster: inCluster()}
	c.mode = mode
	if mode == ModeAuto {
		switch {
		case o.RouterURL != "":
			c.mode = ModeRouter
		case c.inCluster:
			c.mode = ModeDirect
		default:
			c.mode = ModePortForward
		}
	}
	if c.mode == ModeRouter && o.RouterURL == "" {
		return nil, errors.New("mode router needs a router URL (Options.RouterURL / --router)")
	}
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	// Rides out an API server restart (retry.go); claims travel in the storage version.
	c.kube = withAPIRetries(storageversion.Claims(kube))
	if c.core, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building Kubernetes clientset: %w", err)
	}
	c.http = newHTTPClients(o)
	return c, nil
}

func loadConfig(o Options) (*rest.Config, string, error) {
	if o.RESTConfig != nil {
		cfg := rest.CopyConfig(o.RESTConfig)
		tuneConfig(cfg, o.UserAgent)
		ns := o.Namespace
		if ns == "" {
			ns = "default"
		}
		return cfg, ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", errors.New("no Kubernetes configuration found: pass a kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config) or run inside a pod")
		}
		return nil, "", fmt.Errorf("loading Kubernetes configuration: %w", err)
	}
	tuneConfig(cfg, o.UserAgent)
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	return cfg, ns, nil
}

func tuneConfig(cfg *rest.Config, ua string) {
	if cfg.QPS == 0 {
		cfg.QPS = 50
	}
	if cfg.Burst == 0 {
		cfg.Burst = 100
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = ua
	}
}

// inCluster reports whether this process runs in a pod, where pod IPs are
// reachable; it is the condition rest.InClusterConfig checks.
func inCluster() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token")
	return err == nil
}

// Namespace is the namespace the client works in.
func (c *Client) Namespace() string { return c.ns }

// Mode is the resolved connection mode (never ModeAuto).
func (c *Client) Mode() Mode { return c.mode }

// RESTConfig is the Kubernetes client configuration in use.
func (c *Client) RESTConfig() *rest.Config { return rest.CopyConfig(c.cfg) }

// KubeClient is the controller-runtime client the SDK uses, with the
// agent-sandbox kinds registered, for anything the SDK does not wrap. Like
// the SDK's own calls, its reads are retried for up to 30 s while the API
// server is unavailable, and its writes only when the connection was
// refused (nothing reached the server); watches are not retried.
func (c *Client) KubeClient() client.WithWatch { return c.kube }

// InNamespace returns a Client working in namespace ns that shares this
// one's connections.
func (c *Client) InNamespace(ns string) *Client {
	cp := *c
	cp.ns = ns
	return &cp
}

// Close releases idle HTTP connections. Sandbox handles have their own
// Close for port-forwards.
func (c *Client) Close() {
	c.http.closeIdle()
}
