package pki

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"slices"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T) *spec.Config {
	t.Helper()
	c, err := (&spec.Config{Dir: t.TempDir(), Out: io.Discard}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPKIIdentities(t *testing.T) {
	c := testConfig(t)
	if err := Ensure(c); err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(c.Path("pki", "ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, tc := range []struct {
		name, cn, org string
		usage         x509.ExtKeyUsage
	}{
		{"admin", "agent-sandbox-dev-admin", "system:masters", x509.ExtKeyUsageClientAuth},
		{"kubelet", "system:node:" + spec.NodeName, "system:nodes", x509.ExtKeyUsageClientAuth},
		{"controller", spec.ControllerUser, "", x509.ExtKeyUsageClientAuth},
		{"hostpath-provisioner", spec.HostPathProvisionerUser, "", x509.ExtKeyUsageClientAuth},
		{"apiserver", "kube-apiserver", "", x509.ExtKeyUsageServerAuth},
		{"kubelet-serving", spec.NodeName, "", x509.ExtKeyUsageServerAuth},
	} {
		data, _ := os.ReadFile(c.Path("pki", tc.name+".crt"))
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatalf("%s: no certificate", tc.name)
		}
		crt, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := crt.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s: does not verify against the CA: %v", tc.name, err)
		}
		if crt.Subject.CommonName != tc.cn || (tc.org != "" && (len(crt.Subject.Organization) != 1 || crt.Subject.Organization[0] != tc.org)) {
			t.Errorf("%s: subject %v, want CN=%s O=%s", tc.name, crt.Subject, tc.cn, tc.org)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != c.APIServerURL() || len(cfg.CertData) == 0 {
		t.Fatalf("admin kubeconfig: host %s, client cert %d bytes", cfg.Host, len(cfg.CertData))
	}
	// A second run keeps the CA, so kubeconfigs handed out earlier stay valid.
	if err := Ensure(c); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(c.Path("pki", "ca.crt")); string(again) != string(caPEM) {
		t.Fatal("ensurePKI replaced an existing CA")
	}
}

func TestAPIServerCertificateIsReissuedForNewNames(t *testing.T) {
	c := testConfig(t)
	if err := Ensure(c); err != nil {
		t.Fatal(err)
	}
	var want CertSpec
	for _, s := range CertSpecs() {
		if s.Name == "apiserver" {
			want = s
		}
	}
	crt := c.Path("pki", "apiserver.crt")
	if !CoversNames(crt, want) {
		t.Fatal("a fresh API server certificate does not cover its own names")
	}
	for _, name := range []string{spec.BridgeIP, "127.0.0.1", "10.96.0.1"} {
		if !slices.Contains(want.IPs, name) {
			t.Errorf("API server certificate lacks %s", name)
		}
	}
	want.IPs = append(want.IPs, "10.244.0.99")
	if CoversNames(crt, want) {
		t.Fatal("a certificate without a wanted address counts as covering it")
	}
}
