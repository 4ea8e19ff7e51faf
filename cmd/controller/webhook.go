package main

import (
	"errors"
	"flag"
	"os"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/conversion"
)

// webhookFlags are the conversion webhook's flags (names as upstream agent-sandbox's).
type webhookFlags struct {
	enable, manageCerts, configureCRDs bool
	host, certDir, certName, keyName   string
	port                               int
	namespace, serviceName, secretName string
	maxRequestBytes                    int64
}

func bindWebhookFlags(fs *flag.FlagSet) *webhookFlags {
	w := &webhookFlags{}
	fs.BoolVar(&w.enable, "enable-webhook", true, "Serve the CRD conversion webhook (v1beta1 ⇄ v1alpha1). The CRDs' v1beta1 version is unreadable without it.")
	fs.StringVar(&w.host, "webhook-host", "", "Address the conversion webhook listens on (all when empty).")
	fs.IntVar(&w.port, "webhook-port", 9443, "Port the conversion webhook listens on.")
	fs.StringVar(&w.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory holding the webhook's tls.crt and tls.key (with --manage-webhook-certs, the mounted Secret the controller writes).")
	fs.StringVar(&w.certName, "webhook-cert-name", "tls.crt", "File name of the serving certificate in --webhook-cert-dir (only without --manage-webhook-certs).")
	fs.StringVar(&w.keyName, "webhook-key-name", "tls.key", "File name of the serving key in --webhook-cert-dir (only without --manage-webhook-certs).")
	fs.BoolVar(&w.manageCerts, "manage-webhook-certs", true, "Create and rotate the webhook's serving certificate in --webhook-secret-name and inject its CA into the CRDs. Turn off when cert-manager (or anything else) provides the certificate and the CA bundle.")
	fs.BoolVar(&w.configureCRDs, "webhook-configure-crds", true, "Keep the CRDs' conversion pointing at <webhook-service-name>.<webhook-namespace>:443/convert (and, without --manage-webhook-certs, their caBundle equal to <webhook-cert-dir>/ca.crt, as cert-manager writes it).")
	fs.StringVar(&w.namespace, "webhook-namespace", "", "Namespace of the webhook Service and Secret (default: the controller pod's namespace).")
	fs.StringVar(&w.serviceName, "webhook-service-name", "agent-sandbox-webhook-service", "Name of the webhook Service; the certificate is issued for <name>.<namespace>.svc.")
	fs.StringVar(&w.secretName, "webhook-secret-name", "agent-sandbox-webhook-certs", "Secret holding the webhook's CA and serving certificate (--manage-webhook-certs).")
	fs.Int64Var(&w.maxRequestBytes, "webhook-max-request-bytes", conversion.DefaultMaxRequestBytes, "Largest conversion request body accepted (larger: 413). The API server converts a v1beta1 LIST served from its watch cache in one request; the default holds about 8,000 Sandboxes.")
	return w
}

// options turns the flags into the manager's webhook options (nil when disabled).
func (w *webhookFlags) options() (*conversion.Options, error) {
	if !w.enable {
		return nil, nil
	}
	if w.maxRequestBytes <= 0 {
		return nil, errors.New("--webhook-max-request-bytes must be positive")
	}
	opts := &conversion.Options{Host: w.host, Port: w.port, CertDir: w.certDir, CertName: w.certName, KeyName: w.keyName,
		MaxRequestBytes: w.maxRequestBytes}
	ns := w.namespace
	if ns == "" {
		ns = podNamespace()
	}
	if ns == "" && (w.manageCerts || w.configureCRDs) {
		return nil, errors.New("--manage-webhook-certs and --webhook-configure-crds need --webhook-namespace outside a pod")
	}
	if w.manageCerts {
		opts.CertRotation = &conversion.CertRotation{Namespace: ns, ServiceName: w.serviceName, SecretName: w.secretName}
	}
	if w.configureCRDs {
		opts.Service = &conversion.ServiceRef{Namespace: ns, Name: w.serviceName, Port: 443}
	}
	return opts, nil
}

// podNamespace is the namespace of the pod we run in, from the service account mount.
func podNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
