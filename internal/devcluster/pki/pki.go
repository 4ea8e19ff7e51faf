// Package pki makes the local cluster's CA, one certificate per identity, the service-account
// key pair and a kubeconfig per identity, once: later runs reuse them so that kubeconfigs handed
// out earlier keep working.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// CertSpec is one certificate signed by the cluster CA.
type CertSpec struct {
	Name   string // file stem under pki/
	CN     string
	Orgs   []string
	IPs    []string
	DNS    []string
	Server bool
}

// CertSpecs are the identities of the cluster. Our controller and router authenticate with certificates whose
// CN is their service account's user name, so RBAC bindings to those service accounts apply to
// them exactly as they would to pods running as the service accounts.
func CertSpecs() []CertSpec {
	return []CertSpec{
		{Name: "apiserver", CN: "kube-apiserver", Server: true,
			IPs: []string{spec.BridgeIP, "127.0.0.1", "10.96.0.1"},
			DNS: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{Name: "kubelet-serving", CN: spec.NodeName, Server: true, IPs: []string{spec.BridgeIP}, DNS: []string{spec.NodeName}},
		{Name: "kcm-serving", CN: "kube-controller-manager", Server: true, IPs: []string{"127.0.0.1"}, DNS: []string{"localhost"}},
		{Name: "scheduler-serving", CN: "kube-scheduler", Server: true, IPs: []string{"127.0.0.1"}, DNS: []string{"localhost"}},
		{Name: "admin", CN: "agent-sandbox-dev-admin", Orgs: []string{"system:masters"}},
		{Name: "apiserver-kubelet-client", CN: "kube-apiserver-kubelet-client", Orgs: []string{"system:masters"}},
		{Name: "kube-controller-manager", CN: "system:kube-controller-manager"},
		{Name: "kube-scheduler", CN: "system:kube-scheduler"},
		{Name: "kubelet", CN: "system:node:" + spec.NodeName, Orgs: []string{"system:nodes"}},
		{Name: "kwok", CN: "kwok", Orgs: []string{"system:masters"}},
		// The built-in system:node-proxier binding authorizes this user.
		{Name: "kube-proxy", CN: "system:kube-proxy"},
		// Cilium's agent reads and writes much of the API (its CRDs, identities, endpoints,
		// node); it runs as root on this machine anyway, so it gets the admin group rather
		// than a copy of upstream's ClusterRole.
		{Name: "cilium", CN: "cilium-agent", Orgs: []string{"system:masters"}},
		{Name: "controller", CN: spec.ControllerUser},
		{Name: "webhook", CN: "agent-sandbox-webhook", Server: true, IPs: []string{"127.0.0.1"}, DNS: []string{"localhost"}},
		{Name: "router", CN: spec.RouterUser},
		// Bound to the built-in system:persistent-volume-provisioner role (manifests/cluster.yaml).
		{Name: "hostpath-provisioner", CN: spec.HostPathProvisionerUser},
	}
}

// Ensure creates the CA, every certificate and the service-account key pair once; later runs
// reuse them so that kubeconfigs handed out earlier keep working.
func Ensure(c *spec.Config) error {
	dir := c.Path("pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caCert, caKey, err := loadOrCreateCA(dir)
	if err != nil {
		return err
	}
	for _, s := range CertSpecs() {
		if spec.FileExists(filepath.Join(dir, s.Name+".key")) && CoversNames(filepath.Join(dir, s.Name+".crt"), s) {
			continue
		}
		if err := issue(dir, s, caCert, caKey); err != nil {
			return fmt.Errorf("issuing %s certificate: %w", s.Name, err)
		}
	}
	if !spec.FileExists(filepath.Join(dir, "sa.key")) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		if err := writeKey(filepath.Join(dir, "sa.key"), key); err != nil {
			return err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644); err != nil {
			return err
		}
	}
	// One kubeconfig per identity; "admin" is also copied to the top-level kubeconfig.
	for _, id := range []string{"admin", "kube-controller-manager", "kube-scheduler", "kubelet", "kwok", "controller", "router", "kube-proxy", "cilium", "hostpath-provisioner"} {
		if err := writeKubeconfig(c, c.KubeconfigFor(id), id); err != nil {
			return err
		}
	}
	return writeKubeconfig(c, c.KubeconfigPath(), "admin")
}

func writeKubeconfig(c *spec.Config, path, id string) error {
	pki := c.Path("pki")
	ca, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(filepath.Join(pki, id+".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(pki, id+".key"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["agent-sandbox-dev"] = &clientcmdapi.Cluster{Server: c.APIServerURL(), CertificateAuthorityData: ca}
	cfg.AuthInfos[id] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["agent-sandbox-dev"] = &clientcmdapi.Context{Cluster: "agent-sandbox-dev", AuthInfo: id, Namespace: "default"}
	cfg.CurrentContext = "agent-sandbox-dev"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// CoversNames is true when the certificate at path exists and names every address and DNS
// name of s, so that a state dir from before a new SAN (the API server moved to the bridge)
// gets that certificate reissued.
func CoversNames(path string, s CertSpec) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return false
	}
	crt, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return false
	}
	for _, ip := range s.IPs {
		if !slices.ContainsFunc(crt.IPAddresses, func(x net.IP) bool { return x.Equal(net.ParseIP(ip)) }) {
			return false
		}
	}
	for _, d := range s.DNS {
		if !slices.Contains(crt.DNSNames, d) {
			return false
		}
	}
	return true
}

func loadOrCreateCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	crtPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if spec.FileExists(crtPath) && spec.FileExists(keyPath) {
		return loadPair(crtPath, keyPath)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "agent-sandbox-dev-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(crtPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	crt, err := x509.ParseCertificate(der)
	return crt, key, err
}

func issue(dir string, s CertSpec, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.CN, Organization: s.Orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     s.DNS,
	}
	if s.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	for _, ip := range s.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, s.Name+".key"), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, s.Name+".crt"), "CERTIFICATE", der, 0o644)
}

func loadPair(crtPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	crtPEM, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("corrupt CA files in " + filepath.Dir(crtPath))
	}
	crt, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	return crt, key, err
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// TLSConfig trusts the cluster CA and, when identity is set, presents that identity's client
// certificate.
func TLSConfig(c *spec.Config, identity string) (*tls.Config, error) {
	dir := c.Path("pki")
	ca, err := os.ReadFile(dir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if identity != "" {
		crt, err := tls.LoadX509KeyPair(dir+"/"+identity+".crt", dir+"/"+identity+".key")
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{crt}
	}
	return tc, nil
}
