package conversion_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/conversion"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, "conversion", &env))
}

// TestWebhookCertificates runs the webhook as an installation does, against a real API server
// and a throwaway CRD: its certificate comes from the controller's own rotation or from files
// another issuer wrote (cert-manager's Secret layout), and either way the CRD ends up pointing at
// the Service with a caBundle that verifies the certificate the server presents.
func TestWebhookCertificates(t *testing.T) {
	if env == nil {
		testenv.Require(t)
	}
	cases := []struct {
		name   string
		rotate bool
	}{
		{"the controller rotates its own certificate", true},
		{"another issuer wrote tls.crt, tls.key and ca.crt", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns, crd := setupNamespaceAndCRD(t)
			dir := t.TempDir()
			opts := conversion.Options{Host: "127.0.0.1", Port: freePort(t), CertDir: dir, CRDs: []string{crd},
				Service: &conversion.ServiceRef{Namespace: ns, Name: "svc", Port: 443}}
			if tc.rotate {
				opts.CertRotation = &conversion.CertRotation{Namespace: ns, SecretName: "certs", ServiceName: "svc"}
				go mountSecret(ctx, t, ns, "certs", dir) // what the kubelet does for the pod's Secret volume
			} else {
				writeIssuedCerts(t, dir, "svc."+ns+".svc")
			}
			ready := startManager(t, opts)

			// Certificate rotation and the webhook server's start take their time.
			wait := testwrap.Wait{Timeout: time.Minute, Interval: 100 * time.Millisecond}
			var ca []byte
			wait.Eventually(t, "the CRD points at the Service with a caBundle", func() error {
				var err error
				ca, err = crdCABundle(ctx, crd, ns)
				return err
			})
			wait.Eventually(t, "the server is ready", func() error { return ready(nil) })
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				t.Fatalf("caBundle is not PEM: %q", ca)
			}
			conn, err := tls.Dial("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)),
				&tls.Config{RootCAs: pool, ServerName: "svc." + ns + ".svc", MinVersion: tls.VersionTLS12})
			if err != nil {
				t.Fatalf("the caBundle does not verify the served certificate for svc.%s.svc: %v", ns, err)
			}
			_ = conn.Close()
		})
	}
}

func setupNamespaceAndCRD(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	ns := "webhook-" + utilrand.String(6)
	group := ns + ".agents.x-k8s.io"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certs"}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "widgets." + group},
			"spec": map[string]any{
				"group": group, "scope": "Namespaced",
				"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	return ns, "widgets." + group
}

// startManager runs a manager with only the webhook and returns its readiness check.
func startManager(t *testing.T, opts conversion.Options) healthz.Checker {
	t.Helper()
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	skip := true
	mgrOpts := ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}}
	mgrOpts.Controller.SkipNameValidation = &skip
	mgr, err := ctrl.NewManager(env.Config, mgrOpts)
	if err != nil {
		t.Fatal(err)
	}
	check, err := conversion.Setup(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return check
}

// crdCABundle returns the CRD's caBundle once its conversion names the Service.
func crdCABundle(ctx context.Context, name, ns string) ([]byte, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return nil, err
	}
	svc, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service")
	b64, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	if svc["namespace"] != ns || svc["name"] != "svc" || svc["path"] != conversion.Path || b64 == "" {
		return nil, fmt.Errorf("conversion clientConfig service %v, caBundle %d bytes", svc, len(b64))
	}
	return base64.StdEncoding.DecodeString(b64)
}

// mountSecret copies the Secret's keys into dir once they appear, as the kubelet would.
func mountSecret(ctx context.Context, t *testing.T, ns, name, dir string) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		s := &corev1.Secret{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
		if err == nil && len(s.Data["tls.crt"]) > 0 {
			for k, v := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
					t.Errorf("mounting %s: %v", k, err)
				}
			}
			return
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeIssuedCerts writes a CA and a serving certificate for dnsName as cert-manager lays them
// out in its Secret (ca.crt, tls.crt, tls.key).
func writeIssuedCerts(t testing.TB, dir, dnsName string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for name, block := range map[string]*pem.Block{"ca.crt": {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		var buf bytes.Buffer
		_ = pem.Encode(&buf, block)
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
