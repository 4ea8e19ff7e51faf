package conversion

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Server is the webhook's HTTPS server. Unlike controller-runtime's it binds its port with
// SO_REUSEPORT, so that the two processes of a controller pod (the controller and the
// webhook-only container beside it, which share the pod's network namespace) both serve the
// same port: when one of them is killed, the kernel hands every new connection to the other,
// and the API server, which calls a conversion webhook once and never retries it, sees no
// refused connection in the second or so before the pod leaves the Service's endpoints.
type Server struct {
	addr                       string
	certDir, certName, keyName string
	handler                    http.Handler
	serving                    atomic.Bool
}

// NewServer returns a server of handler on host:port with the certificate in certDir (certName
// and keyName default to tls.crt and tls.key), reloaded whenever the files change.
func NewServer(host string, port int, certDir, certName, keyName string, handler http.Handler) *Server {
	if certName == "" {
		certName = "tls.crt"
	}
	if keyName == "" {
		keyName = "tls.key"
	}
	return &Server{addr: net.JoinHostPort(host, strconv.Itoa(port)), certDir: certDir,
		certName: certName, keyName: keyName, handler: handler}
}

// Start serves until ctx ends, then lets requests under way finish (up to 30 s).
func (s *Server) Start(ctx context.Context) error {
	pair, err := loadKeyPair(filepath.Join(s.certDir, s.certName), filepath.Join(s.certDir, s.keyName))
	if err != nil {
		return fmt.Errorf("loading the webhook certificate: %w", err)
	}
	lc := net.ListenConfig{Control: reusePort}
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("webhook listener: %w", err)
	}
	tlsLn := tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate,
		NextProtos: []string{"h2", "http/1.1"}})
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		s.serving.Store(false)
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	s.serving.Store(true)
	if err := srv.Serve(tlsLn); !errors.Is(err, http.ErrServerClosed) {
		s.serving.Store(false)
		return err
	}
	<-stopped
	return nil
}

// certsPresent: the key pair is on disk and loads.
func (s *Server) certsPresent() bool {
	_, err := tls.LoadX509KeyPair(filepath.Join(s.certDir, s.certName), filepath.Join(s.certDir, s.keyName))
	return err == nil
}

// Ready is a readiness check that passes while this process serves. It does not dial the
// port: with SO_REUSEPORT that connection may reach the sibling process instead.
func (s *Server) Ready(*http.Request) error {
	if !s.serving.Load() {
		return errors.New("the conversion webhook is not serving yet")
	}
	return nil
}

// reusePort sets SO_REUSEPORT on the listening socket before it binds.
func reusePort(_, _ string, c syscall.RawConn) error {
	var sockErr error
	if err := c.Control(func(fd uintptr) {
		sockErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return sockErr
}
