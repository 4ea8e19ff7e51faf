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
func writeSelfSigned(t *testing.T, dir string) { writeSelfSignedSerial(t, dir, 1) }

// writeSelfSignedSerial writes a self-signed pair with the given serial number.
func writeSelfSignedSerial(t *testing.T, dir string, serial int64) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
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

// The served certificate follows the files: a rotation (new files) is served from the next
// handshake on, and a pair caught half written keeps the one before.
func TestTheKeyPairFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	writeSelfSignedSerial(t, dir, 1)
	kp, err := loadKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	kp.interval = 0 // look at the files on every handshake
	serial := func() int64 {
		c, err := kp.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.Int64()
	}
	if got := serial(); got != 1 {
		t.Fatalf("serving serial %d; want the first pair's 1", got)
	}
	time.Sleep(10 * time.Millisecond) // a later modification time for the new files
	writeSelfSignedSerial(t, dir, 2)
	if got := serial(); got != 2 {
		t.Fatalf("serving serial %d after the rotation; want 2", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("-----BEGIN EC PRIV"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != 2 {
		t.Fatalf("serving serial %d with a half-written key; want the last good pair's 2", got)
	}
}
