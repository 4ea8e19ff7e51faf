package controlplane

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/e2b"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// DefaultReadyTimeout bounds how long create and connect wait for a sandbox to be ready.
const DefaultReadyTimeout = 60 * time.Second

// Options configure the control plane.
type Options struct {
	// Config reaches the API server; its credentials are never used (every call carries the
	// caller's key).
	Config *rest.Config
	// Signer mints the envd access tokens (the router's scoped-token secret).
	Signer *scopedtoken.Signer
	// EnvdVersion is reported with each sandbox (default: what sandboxd serves, e2b.EnvdVersion).
	EnvdVersion string
	// Domain is reported as each sandbox's domain; "" reports none.
	Domain string
	// ReadyTimeout bounds the waits of create and connect (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	Clock        clock.Clock
	Log          *slog.Logger
}

// server is the control plane's state.
type server struct {
	keys         *keys
	signer       *scopedtoken.Signer
	envdVersion  string
	domain       *string
	readyTimeout time.Duration
	clock        clock.Clock
	log          *slog.Logger
}

// New returns E2B's REST API as an http.Handler.
func New(o Options) (http.Handler, error) {
	if o.Config == nil || o.Signer == nil {
		return nil, errors.New("controlplane: Config and Signer are required")
	}
	if o.EnvdVersion == "" {
		o.EnvdVersion = e2b.EnvdVersion
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	scheme, mapper, err := kinds()
	if err != nil {
		return nil, err
	}
	s := &server{keys: newKeys(o.Config, scheme, mapper, o.Clock), signer: o.Signer, envdVersion: o.EnvdVersion,
		readyTimeout: o.ReadyTimeout, clock: o.Clock, log: o.Log}
	if o.Domain != "" {
		s.domain = &o.Domain
	}
	return s.routes(), nil
}

// kinds is the scheme and a fixed REST mapping of the kinds the control plane uses: no
// discovery call per key.
func kinds() (*runtime.Scheme, meta.RESTMapper, error) {
	scheme := runtime.NewScheme()
	if err := extv1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	// Claims travel as v1beta1 (storageversion.Claims).
	if err := extv1beta1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := agentsv1beta1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	plurals := map[string]string{"Sandbox": "sandboxes", "SandboxClaim": "sandboxclaims",
		"SandboxTemplate": "sandboxtemplates", "SandboxWarmPool": "sandboxwarmpools"}
	for gvk := range scheme.AllKnownTypes() {
		plural, ok := plurals[gvk.Kind]
		if !ok {
			continue
		}
		mapper.AddSpecific(gvk, gvk.GroupVersion().WithResource(plural),
			gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind)), meta.RESTScopeNamespace)
	}
	return scheme, mapper, nil
}

// handlerFunc is an endpoint: it answers itself or returns an error for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller) error

// routes maps E2B's paths to their endpoints; every one first authenticates the key.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h handlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			start := s.clock.Now()
			c, err := s.keys.callerOf(r)
			authed := s.clock.Since(start)
			if err == nil {
				err = h(w, r, c)
			}
			if err != nil {
				writeError(w, err)
			}
			user := ""
			if c != nil {
				user = c.user
			}
			s.log.Info("e2b api", "method", r.Method, "path", r.URL.Path, "user", user, "err", err,
				"authMs", authed.Milliseconds(), "ms", s.clock.Since(start).Milliseconds())
		})
	}
	handle("POST /sandboxes", s.create(15))
	handle("POST /v2/sandboxes", s.create(300))
	handle("GET /sandboxes", s.list)
	handle("GET /v2/sandboxes", s.list)
	handle("GET /sandboxes/{id}", s.get)
	handle("DELETE /sandboxes/{id}", s.kill)
	handle("POST /sandboxes/{id}/timeout", s.setTimeout)
	handle("POST /sandboxes/{id}/refreshes", s.refresh)
	handle("POST /sandboxes/{id}/pause", s.pause)
	handle("POST /sandboxes/{id}/resume", s.connect(http.StatusCreated))
	handle("POST /sandboxes/{id}/connect", s.connect(http.StatusOK))
	handle("POST /sandboxes/{id}/fork", s.fork)
	handle("POST /v2/sandboxes/{id}/connect", s.connect(http.StatusOK))
	for pattern, instead := range unsupported {
		handle(pattern, func(http.ResponseWriter, *http.Request, *caller) error {
			return errorf(http.StatusNotImplemented, "not supported by agent-sandbox: %s", instead)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// unsupported are E2B's endpoints we do not serve, with what to use instead.
var unsupported = map[string]string{
	"/templates/":                    "templates are SandboxTemplates: create them with kubectl or the Helm chart, and warm pools of them",
	"/templates":                     "templates are SandboxTemplates: create them with kubectl or the Helm chart, and warm pools of them",
	"/v2/templates/":                 "templates are SandboxTemplates: create them with kubectl or the Helm chart",
	"/v3/templates":                  "templates are SandboxTemplates: create them with kubectl or the Helm chart",
	"/v3/templates/":                 "templates are SandboxTemplates: create them with kubectl or the Helm chart",
	"POST /sandboxes/{id}/snapshots": "snapshots: pause keeps the sandbox's volumes; connect resumes it",
	"GET /sandboxes/{id}/metrics":    "metrics: the cluster's own metrics (kubelet, cAdvisor) cover sandbox pods",
	"GET /sandboxes/metrics":         "metrics: the cluster's own metrics (kubelet, cAdvisor) cover sandbox pods",
	"GET /sandboxes/{id}/logs":       "logs: kubectl logs of the sandbox's pod",
	"GET /v2/sandboxes/{id}/logs":    "logs: kubectl logs of the sandbox's pod",
	"PUT /sandboxes/{id}/network":    "network updates: egress is the template's (docs/egress.md)",
	"/volumes":                       "volumes: the template's volumeClaimTemplates",
	"/volumes/":                      "volumes: the template's volumeClaimTemplates",
	"/secrets":                       "secrets: Kubernetes Secrets and the template's env",
	"/secrets/":                      "secrets: Kubernetes Secrets and the template's env",
	"/snapshots":                     "snapshots: pause keeps the sandbox's volumes",
	"/snapshots/":                    "snapshots: pause keeps the sandbox's volumes",
	"/teams":                         "teams: namespaces and RBAC",
	"/teams/":                        "teams: namespaces and RBAC",
}
