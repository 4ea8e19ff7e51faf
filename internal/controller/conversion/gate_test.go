package conversion

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// writeSelfSigned writes tls.crt and tls.key for localhost into dir.
func writeSelfSigned(t *testing.T, dir string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The kubelet may mount the certificate Secret long after the pod starts (the leader created it
// meanwhile) while the rotator's own check has backed off for minutes: the gate sees the files
// itself, so the replica serves (and turns ready) as soon as they are there.
func TestTheWebhookServesOnceTheCertificateIsMountedWithoutTheRotator(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	srv := NewServer("127.0.0.1", port, dir, "", "", http.NewServeMux())
	never := make(chan struct{}) // the rotator's IsReady, still backing off
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&gatedServer{server: srv, ready: never}).Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the webhook server stopped with %v", err)
		}
	})
	if srv.Ready(nil) == nil {
		t.Fatal("ready before any certificate exists")
	}
	writeSelfSigned(t, dir)
	testwrap.Wait{Timeout: 10 * time.Second, Interval: 20 * time.Millisecond}.Eventually(t,
		"serving once the certificate files exist", func() error { return srv.Ready(nil) })
}
