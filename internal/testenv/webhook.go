package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/conversion"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
)

// configureConversionWebhook makes envtest install the CRDs with webhook conversion pointing at
// https://127.0.0.1:<free port>/convert and a CA of its own; the real API server then calls the
// webhook the test's manager serves (Env.WebhookOptions).
func configureConversionWebhook(env *envtest.Environment) error {
	scheme, err := manager.NewScheme()
	if err != nil {
		return err
	}
	env.CRDInstallOptions.Scheme = scheme
	env.WebhookInstallOptions.LocalServingHost = "127.0.0.1"
	return nil
}

// WebhookOptions are the manager options that serve the conversion webhook envtest installed
// (nil unless Start was asked for it).
func (e *Env) WebhookOptions() *conversion.Options {
	w := e.env.WebhookInstallOptions
	if w.LocalServingCertDir == "" {
		return nil
	}
	return &conversion.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir}
}

// WaitForWebhook waits until the conversion webhook accepts TLS connections (no-op when Start
// was not asked for it), so that tests never see "connection refused" from the API server.
func (e *Env) WaitForWebhook(timeout time.Duration) error {
	w := e.WebhookOptions()
	if w == nil {
		return nil
	}
	addr := net.JoinHostPort(w.Host, strconv.Itoa(w.Port))
	deadline := time.Now().Add(timeout)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that it listens
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("conversion webhook at %s not serving after %s: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ServeConversion runs the conversion webhook alone (a webhook-only manager, no controllers)
// for tests that write objects in a version other than the stored one without a manager of
// their own; stop ends it. Start must have been asked for ConversionWebhook.
func (e *Env) ServeConversion() (stop func(), err error) {
	w := e.WebhookOptions()
	if w == nil {
		return nil, fmt.Errorf("the control plane was started without ConversionWebhook")
	}
	mgr, err := manager.New(e.Config, manager.Options{SkipNameValidation: true, WebhookOnly: true, Webhook: w, MetricsAddr: "0"})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "the conversion webhook's manager stopped with %v\n", err)
		}
	}
	if err := e.WaitForWebhook(time.Minute); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
