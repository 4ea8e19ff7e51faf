package conversion_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/conversion"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// BenchmarkAConversionCallOnAKeptOrANewConnection is why the webhook keeps kube-apiserver's
// connection open (docs/availability.md, "The one call a kill may cost"): a connection per call
// would leave a killed process no connection to lose, at the price of a TLS handshake per call.
// The client is set up as client-go sets up kube-apiserver's webhook client; the certificates
// are the rotator's (RSA 2048) and an ECDSA P-256 pair.
func BenchmarkAConversionCallOnAKeptOrANewConnection(b *testing.B) {
	for _, key := range []string{"rsa2048", "ecdsa-p256"} {
		dir := b.TempDir()
		if key == "rsa2048" {
			writeRSASelfSigned(b, dir)
		} else {
			writeIssuedCerts(b, dir, "localhost")
		}
		url := serveConversionStub(b, dir)
		review := bytes.Repeat([]byte("x"), 3000) // a claim's ConversionReview is about 3 KB
		for _, keep := range []bool{true, false} {
			b.Run(key+"/keep-alive="+strconv.FormatBool(keep), func(b *testing.B) {
				tr := utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}) //nolint:gosec // a test certificate
				tr.DisableKeepAlives = !keep
				c := &http.Client{Transport: tr}
				defer c.CloseIdleConnections()
				for b.Loop() {
					resp, err := c.Post(url, "application/json", bytes.NewReader(review))
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			})
		}
	}
}

// serveConversionStub serves, with the pair in dir, a handler answering 3 KB as a conversion
// does, until the benchmark ends; it returns the webhook's URL.
func serveConversionStub(b *testing.B, dir string) string {
	b.Helper()
	port := freePort(b)
	mux := http.NewServeMux()
	answer := bytes.Repeat([]byte("y"), 3000)
	mux.HandleFunc(conversion.Path, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(answer)
	})
	srv := conversion.NewServer("127.0.0.1", port, dir, "", "", mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("the webhook ended with %v", err)
		}
	})
	testwrap.Wait{Timeout: 10 * time.Second, Interval: 10 * time.Millisecond}.Eventually(b, "the webhook serving",
		func() error { return srv.Ready(nil) })
	return "https://127.0.0.1:" + strconv.Itoa(port) + conversion.Path
}

// writeRSASelfSigned writes a self-signed RSA 2048 pair for localhost, the key the rotator makes.
func writeRSASelfSigned(b *testing.B, dir string) {
	b.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}
