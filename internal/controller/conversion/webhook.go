// Package conversion serves the CRD conversion webhook (v1beta1 ⇄ v1alpha1, see
// docs/api-versions.md) from the controller, and, unless the certificates come from elsewhere
// (cert-manager, envtest, the local cluster), creates and rotates its own serving certificate and
// injects the CA into the four CRDs with github.com/open-policy-agent/cert-controller.
package conversion

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// The cert rotator keeps the serving certificate in a Secret of the controller's namespace (the
// install ships it empty) and writes the CA into the CRDs' conversion caBundle; the controller
// also points the CRDs' conversion at its Service.
// +kubebuilder:rbac:groups="",namespace=agent-sandbox-system,resources=secrets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;update;patch

// Path is where the conversion webhook is served (the CRDs' clientConfig points there).
const Path = "/convert"

// CRDs are the CustomResourceDefinitions converted by the webhook.
var CRDs = []string{
	"sandboxes.agents.x-k8s.io",
	"sandboxclaims.extensions.agents.x-k8s.io",
	"sandboxtemplates.extensions.agents.x-k8s.io",
	"sandboxwarmpools.extensions.agents.x-k8s.io",
}

// Options configures the webhook server.
type Options struct {
	// Host and Port the HTTPS server listens on (Host empty: all addresses).
	Host string
	Port int
	// CertDir holds the serving certificate and key (CertName, KeyName: tls.crt and tls.key by
	// default). With CertRotation they are the mounted Secret the rotator writes; otherwise
	// someone else provides them (cert-manager, envtest, the dev cluster's CA).
	CertDir, CertName, KeyName string
	// CertRotation, when set, makes the controller create and rotate its certificate.
	CertRotation *CertRotation
	// Service, when set, is kept in the CRDs' spec.conversion (with caBundle = CertDir/ca.crt
	// unless CertRotation manages it); nil leaves the CRDs as installed (envtest, dev cluster).
	Service *ServiceRef
	// CRDs whose conversion this webhook serves; the four of ours when empty (tests use others).
	CRDs []string
	// MaxRequestBytes bounds a ConversionReview's body (DefaultMaxRequestBytes when 0): a larger
	// one is refused with 413 before it is read, so no caller can make the process hold an
	// arbitrary body in memory.
	MaxRequestBytes int64
}

// DefaultMaxRequestBytes is the default bound of a conversion request. The API server converts
// the items of a v1beta1 LIST served from its watch cache in one request: 32 MiB holds about
// 8,000 Sandboxes of 4 KiB; paginated lists (kubectl, client-go's 500 per page) stay far below.
const DefaultMaxRequestBytes int64 = 32 << 20

// CertRotation names what the controller's own certificate management touches.
type CertRotation struct {
	Namespace   string // of the Secret and the Service
	SecretName  string // holds the CA and the serving key pair
	ServiceName string // the webhook Service; the certificate is for <svc>.<ns>.svc
}

// Setup registers the conversion webhook with mgr. The HTTPS server starts once its certificate
// is in place (immediately without CertRotation) and runs on every replica, leader or not, and
// in every process of a replica that serves it (the port is shared, see Server). The returned
// checker passes while this process serves.
func Setup(mgr ctrl.Manager, opts Options) (healthz.Checker, error) {
	if len(opts.CRDs) == 0 {
		opts.CRDs = CRDs
	}
	// controller-runtime's webhook server is never started: it lends its mux, whose handlers
	// feed controller_runtime_webhook_* (requests by code, latency, in flight) as its own would,
	// for dashboards and alerts written for controller-runtime webhooks.
	hooks := webhook.NewServer(webhook.Options{})
	limit := opts.MaxRequestBytes
	if limit <= 0 {
		limit = DefaultMaxRequestBytes
	}
	hooks.Register(Path, boundedBody(conversion.NewWebhookHandler(mgr.GetScheme()), limit))
	server := NewServer(opts.Host, opts.Port, opts.CertDir, opts.CertName, opts.KeyName, hooks.WebhookMux())
	ready := make(chan struct{})
	if opts.CertRotation != nil {
		if err := addRotator(mgr, opts, ready); err != nil {
			return nil, err
		}
	} else {
		close(ready)
	}
	if err := mgr.Add(&gatedServer{Server: hooks, server: server, ready: ready}); err != nil {
		return nil, err
	}
	if opts.Service != nil {
		c := &crdConfigurer{client: mgr.GetClient(), crds: opts.CRDs, service: *opts.Service, interval: time.Minute}
		if opts.CertRotation == nil {
			c.caFile = filepath.Join(opts.CertDir, "ca.crt")
		}
		if err := mgr.Add(c); err != nil {
			return nil, err
		}
	}
	return server.Ready, nil
}

// addRotator has cert-controller keep a CA and a serving certificate for the Service in the
// Secret, inject the CA into the CRDs, and close ready once the certificate is on disk.
func addRotator(mgr ctrl.Manager, opts Options, ready chan struct{}) error {
	r := opts.CertRotation
	if r.Namespace == "" || r.SecretName == "" || r.ServiceName == "" {
		return errors.New("webhook certificate rotation needs a namespace, a Secret and a Service name")
	}
	webhooks := make([]rotator.WebhookInfo, len(opts.CRDs))
	for i, crd := range opts.CRDs {
		webhooks[i] = rotator.WebhookInfo{Name: crd, Type: rotator.CRDConversion}
	}
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: r.Namespace, Name: r.SecretName},
		CertDir:        opts.CertDir,
		CertName:       opts.CertName,
		KeyName:        opts.KeyName,
		CAName:         "agent-sandbox-ca",
		CAOrganization: "agent-sandbox",
		DNSName:        fmt.Sprintf("%s.%s.svc", r.ServiceName, r.Namespace),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", r.ServiceName, r.Namespace)},
		IsReady:        ready,
		Webhooks:       webhooks,
		FieldOwner:     string(agentsv1beta1.FieldOwner),
	})
	if err != nil {
		return fmt.Errorf("setting up webhook certificate rotation: %w", err)
	}
	return nil
}

// gatedServer starts the webhook server once its certificate exists. It is a webhook.Server
// (the one lending its mux) so that the manager starts it with its webhooks, before it waits for
// its caches: after an upgrade the controllers' informers list objects still stored in v1alpha1,
// which the API server converts through this very webhook.
type gatedServer struct {
	webhook.Server
	server *Server
	ready  <-chan struct{}
}

// certPoll is how often the gate looks for the certificate files itself. The rotator's own
// check backs off exponentially (1 s, 2 s, 4 s, … with jitter): when the kubelet mounts the
// Secret late (the leader created it after this pod started) the rotator may look again
// minutes later, and the replica stays unready all that time.
const certPoll = 500 * time.Millisecond

func (g *gatedServer) Start(ctx context.Context) error {
	tick := time.NewTicker(certPoll)
	defer tick.Stop()
wait:
	for {
		select {
		case <-g.ready:
			break wait
		case <-tick.C:
			if g.server.certsPresent() {
				break wait
			}
		case <-ctx.Done():
			return nil
		}
	}
	ctrl.Log.WithName("conversion-webhook").Info("serving", "path", Path)
	return g.server.Start(ctx)
}

// NeedLeaderElection is false: the API server may call any replica behind the Service.
func (g *gatedServer) NeedLeaderElection() bool { return false }

// boundedBody refuses a request whose declared length passes limit with 413, and cuts off one
// that sends more than it declared (or declares nothing) at limit: the decoder then fails on the
// truncated body and the handler answers with an error.
func boundedBody(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			http.Error(w, fmt.Sprintf("a conversion request may hold at most %d bytes", limit), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}
