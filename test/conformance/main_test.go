// Package conformance checks that sandboxd and the sandbox-router answer upstream's clients
// (kubernetes-sigs/agent-sandbox: the Python SDK k8s_agent_sandbox and the Go SDK
// clients/go/sandbox) as upstream's python runtime, sandboxd and router do. Every request here is
// shaped as those clients send it (headers, percent-quoting of paths, JSON spacing, multipart
// parts, gRPC Execute of ["/bin/sh", "-c", cmd]); the fixtures were written from reading the
// clients' code, not copied from it. Each case runs against sandboxd directly and through the
// router, which the upstream clients reach with the X-Sandbox-* headers. E2B's JS SDK, unmodified,
// runs against sandboxd's envd port (e2b_sdk_test.go).
package conformance

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sandboxID is the Sandbox the clients name in X-Sandbox-ID.
const sandboxID = "sandbox-claim-1a2b3c4d"

// target is where a client sends its requests: sandboxd itself (the in-cluster and pod-tunnel
// modes) or the router (the tunnel, gateway and direct modes, with router headers).
type target struct {
	name    string
	baseURL string
	headers http.Header // router headers, nil when talking to sandboxd directly
	grpc    string      // host:port for gRPC
}

// forEachTarget runs f against a fresh sandboxd, once directly and once through a router in
// front of it; root is the sandbox root directory.
func forEachTarget(t *testing.T, f func(t *testing.T, tg target, root string), opts ...sdktest.SandboxdOptions) {
	for _, viaRouter := range []bool{false, true} {
		name := "direct"
		if viaRouter {
			name = "router"
		}
		t.Run(name, func(t *testing.T) {
			d := sdktest.NewSandboxd(t, opts...)
			tg := target{name: name, baseURL: d.URL, grpc: strings.TrimPrefix(d.URL, "http://")}
			if viaRouter {
				r := sdktest.NewRouter(t)
				tg.baseURL, tg.grpc = r.URL, strings.TrimPrefix(r.URL, "http://")
				tg.headers = http.Header{
					"X-Sandbox-Id":        {sandboxID},
					"X-Sandbox-Namespace": {"default"},
					"X-Sandbox-Port":      {strconv.Itoa(d.Port)},
				}
			}
			f(t, tg, d.Root)
		})
	}
}

// client is the header set of one upstream SDK.
type client string

const (
	python client = "python" // requests: python-requests UA, Accept */*, X-Sandbox-Timeout "60"
	goSDK  client = "go"     // net/http: Go-http-client UA, X-Request-ID, X-Sandbox-Timeout as a float
)

// send issues one request as c would, to tg.
func send(t *testing.T, tg target, c client, method, path string, body []byte, contentType string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, tg.baseURL+"/"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	switch c {
	case python:
		req.Header.Set("User-Agent", "python-requests/2.32.3")
		req.Header.Set("Accept", "*/*")
		req.Header.Set("Accept-Encoding", "gzip, deflate")
		if tg.headers != nil {
			req.Header.Set("X-Sandbox-Timeout", "60")
		}
	case goSDK:
		req.Header.Set("X-Request-ID", "0123456789abcdef")
		if tg.headers != nil {
			req.Header.Set("X-Sandbox-Timeout", "59.9995")
		}
	}
	for k, v := range tg.headers {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	tr := &http.Transport{DisableCompression: c == goSDK}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
