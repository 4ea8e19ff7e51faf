package router

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testCtx bounds a test that would otherwise hang forever if the router buffered; it is a
// safety net, not a timing assertion.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func detail(t *testing.T, resp *http.Response) string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var body struct{ Detail string }
	if err := json.Unmarshal([]byte(readAll(t, resp)), &body); err != nil {
		t.Fatal(err)
	}
	return body.Detail
}

func TestProxyErrors(t *testing.T) {
	res := &stubResolver{
		targets: map[string]Target{"default/up": loopback},
		errs: map[string]error{
			"default/pending": &ResolveError{Kind: ErrNotReady, Namespace: "default", Name: "pending", Reason: "PodPending"},
			"default/broken":  errors.New("resolver exploded"),
		},
	}
	router := newRouter(t, routerOpts{resolver: res})
	client := h1Client(t)
	dead := closedPort(t)
	tests := []struct {
		name       string
		method     string
		headers    map[string]string
		wantCode   int
		wantDetail string
		wantRetry  bool
	}{
		{"no id", "GET", nil, 400, msgIDRequired, false},
		{"bad id", "GET", map[string]string{HeaderSandboxID: "Not_Valid"}, 400, msgInvalidID, false},
		{"bad namespace", "GET", map[string]string{HeaderSandboxID: "up", HeaderSandboxNamespace: "a.b"}, 400, msgInvalidNamespace, false},
		{"bad port", "GET", map[string]string{HeaderSandboxID: "up", HeaderSandboxPort: "99999"}, 400, msgInvalidPort, false},
		{"unknown", "GET", map[string]string{HeaderSandboxID: "nope"}, 404, "sandbox default/nope not found", false},
		{"unknown in namespace", "GET", map[string]string{HeaderSandboxID: "up", HeaderSandboxNamespace: "other"}, 404, "sandbox other/up not found", false},
		{"not ready", "GET", map[string]string{HeaderSandboxID: "pending"}, 503, "sandbox default/pending is not ready (PodPending)", true},
		{"resolver failure", "GET", map[string]string{HeaderSandboxID: "broken"}, 503, "Could not resolve the backend sandbox: broken", true},
		{"dial refused", "GET", map[string]string{HeaderSandboxID: "up", HeaderSandboxPort: dead}, 502, "Could not connect to the backend sandbox: up", false},
		{"dial refused with body", "POST", map[string]string{HeaderSandboxID: "up", HeaderSandboxPort: dead}, 502, "Could not connect to the backend sandbox: up", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.method == "POST" {
				body = strings.NewReader("payload")
			}
			req := routed(t, tt.method, router.URL+"/x", "", "", body)
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("code = %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if got := resp.Header.Get("Retry-After"); (got == "1") != tt.wantRetry {
				t.Fatalf("Retry-After = %q", got)
			}
			if got := detail(t, resp); got != tt.wantDetail {
				t.Fatalf("detail = %q, want %q", got, tt.wantDetail)
			}
		})
	}
}

func TestProxyConnectRefused(t *testing.T) {
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/up": loopback}}})
	req := routed(t, http.MethodConnect, router.URL, "up", "", nil)
	req.Host = "example.com:443"
	resp, err := h1Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("code = %d", resp.StatusCode)
	}
	readAll(t, resp)
}

// A refused dial is retried, and the retry follows the cache to the Sandbox's new pod.
func TestProxyRetryFollowsCache(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "moved")
	}))
	res := &stubResolver{
		// 127.0.0.2 is loopback but nothing listens there: connection refused.
		targets: map[string]Target{"default/sb": {Addr: netip.MustParseAddr("127.0.0.2")}},
		next:    map[string]Target{"default/sb": loopback},
	}
	m := NewMetrics(nil)
	router := newRouter(t, routerOpts{resolver: res, metrics: m})
	resp, err := h1Client(t).Do(routed(t, "GET", router.URL, "sb", port, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != 200 || got != "moved" {
		t.Fatalf("got %d %q", resp.StatusCode, got)
	}
	if n := testutil.ToFloat64(m.retries.WithLabelValues("default")); n != 1 {
		t.Fatalf("retries = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.upstreamErrors.WithLabelValues("default", upstreamDial)); n != 0 {
		t.Fatalf("dial errors = %v, want 0 after a successful retry", n)
	}
}

func TestProxyDialErrorMetrics(t *testing.T) {
	m := NewMetrics(nil)
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}, metrics: m})
	resp, err := h1Client(t).Do(routed(t, "GET", router.URL, "sb", closedPort(t), nil))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := testutil.ToFloat64(m.retries.WithLabelValues("default")); n != 2 {
		t.Fatalf("retries = %v, want 2", n)
	}
	if n := testutil.ToFloat64(m.upstreamErrors.WithLabelValues("default", upstreamDial)); n != 1 {
		t.Fatalf("dial errors = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.requests.WithLabelValues("GET", "502", "default")); n != 1 {
		t.Fatalf("502 count = %v", n)
	}
}

// What reaches the sandbox: path and query byte for byte, forwarding headers set, the caller's
// credentials and hop-by-hop headers gone, routing headers kept.
func TestProxyRequestShaping(t *testing.T) {
	seen := make(chan *http.Request, 1)
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Clone(context.Background())
	}))
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}})
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"http1", h1Client(t)}, {"h2c", h2cClient(t)}} {
		t.Run(c.name, func(t *testing.T) {
			req := routed(t, "GET", router.URL+"/files/a%2Fb/c%20d?path=%2Ftmp&x=1&x=2", "sb", port, nil)
			req.Header.Set("Authorization", "Bearer secret")
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("X-Custom", "kept")
			if c.name == "http1" {
				req.Header.Set("Connection", "X-Hop")
				req.Header.Set("X-Hop", "dropped")
			}
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			r := <-seen
			checks := []struct{ what, got, want string }{
				{"escaped path", r.URL.EscapedPath(), "/files/a%2Fb/c%20d"},
				{"query", r.URL.RawQuery, "path=%2Ftmp&x=1&x=2"},
				{"authorization", r.Header.Get("Authorization"), ""},
				{"hop-by-hop", r.Header.Get("X-Hop"), ""},
				{"custom", r.Header.Get("X-Custom"), "kept"},
				{"sandbox id", r.Header.Get(HeaderSandboxID), "sb"},
				{"x-forwarded-for", r.Header.Get("X-Forwarded-For"), "127.0.0.1"},
				{"x-forwarded-proto", r.Header.Get("X-Forwarded-Proto"), "http"},
				{"x-forwarded-host", r.Header.Get("X-Forwarded-Host"), strings.TrimPrefix(router.URL, "http://")},
				{"host", r.Host, "127.0.0.1:" + port},
				{"proto", r.Proto, map[string]string{"http1": "HTTP/1.1", "h2c": "HTTP/2.0"}[c.name]},
			}
			for _, ch := range checks {
				if ch.got != ch.want {
					t.Errorf("%s = %q, want %q", ch.what, ch.got, ch.want)
				}
			}
		})
	}
}

func TestProxyResponseHeaderTimeout(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; released when the router gives up
	}))
	m := NewMetrics(nil)
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}},
		metrics: m, headerTO: 10 * time.Millisecond})
	resp, err := h1Client(t).Do(routed(t, "GET", router.URL, "sb", port, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("code = %d", resp.StatusCode)
	}
	if got := detail(t, resp); got != "Timed out waiting for the backend sandbox: sb" {
		t.Fatalf("detail = %q", got)
	}
	if n := testutil.ToFloat64(m.upstreamErrors.WithLabelValues("default", upstreamTimeout)); n != 1 {
		t.Fatalf("timeout errors = %v", n)
	}
}

// An HTTP/2 caller in front of a sandbox that only speaks HTTP/1.1 gets a clean 502, not a hang.
func TestProxyH2CToHTTP1OnlyUpstream(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}})
	resp, err := h2cClient(t).Do(routed(t, "GET", router.URL, "sb", port, nil).WithContext(testCtx(t)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("code = %d", resp.StatusCode)
	}
	t.Log(detail(t, resp))
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{context.Canceled, upstreamCanceled},
		{context.DeadlineExceeded, upstreamTimeout},
		{errors.New("boom"), upstreamOther},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// TestProxySandboxTimeout: X-Sandbox-Timeout bounds how long the sandbox may stay silent, as in
// upstream's Python router: 504 with its detail when no response comes in time, capped at the
// proxy's MaxTimeout; bad values are refused with a 400.
func TestProxySandboxTimeout(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("sleep"))
		every, _ := time.ParseDuration(r.URL.Query().Get("every"))
		if every == 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "done")
			return
		}
		// Trickle: a slow but steady answer is never cut.
		for end := time.Now().Add(d); time.Now().Before(end); {
			_, _ = io.WriteString(w, ".")
			http.NewResponseController(w).Flush()
			time.Sleep(every)
		}
	}))
	p := NewProxy(ProxyOptions{Resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}, MaxTimeout: 300 * time.Millisecond})
	router := httptest.NewUnstartedServer(p)
	router.Config.Protocols = bothProtocols()
	router.Start()
	t.Cleanup(func() { router.Close(); p.Close() })
	tests := []struct {
		name       string
		query      string
		timeout    string
		wantCode   int
		wantDetail string
		wantBody   string
	}{
		{"answer in time", "sleep=10ms", "5", 200, "", "done"},
		{"no header: no limit", "sleep=500ms", "", 200, "", "done"},
		{"silent too long", "sleep=2s", "0.1", 504, "Timed out waiting for the backend sandbox: sb", ""},
		{"capped at the proxy timeout", "sleep=2s", "3600", 504, "Timed out waiting for the backend sandbox: sb", ""},
		{"steady trickle is not cut", "sleep=400ms&every=20ms", "0.2", 200, "", ""},
		{"bad value", "sleep=0s", "abc", 400, msgInvalidTimeout, ""},
		{"zero", "sleep=0s", "0", 400, msgInvalidTimeout, ""},
	}
	client := h1Client(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := routed(t, "GET", router.URL+"/slow?"+tc.query, "sb", port, nil)
			if tc.timeout != "" {
				req.Header.Set(HeaderSandboxTimeout, tc.timeout)
			}
			start := time.Now()
			resp, err := client.Do(req.WithContext(testCtx(t)))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tc.wantCode, readAll(t, resp))
			}
			switch {
			case tc.wantDetail != "":
				if got := detail(t, resp); got != tc.wantDetail {
					t.Fatalf("detail %q, want %q", got, tc.wantDetail)
				}
			case tc.wantBody != "":
				if got := readAll(t, resp); got != tc.wantBody {
					t.Fatalf("body %q, want %q", got, tc.wantBody)
				}
			default:
				if got := readAll(t, resp); len(got) < 5 || strings.Trim(got, ".") != "" {
					t.Fatalf("body %q, want the whole trickle of dots", got)
				}
			}
			if tc.wantCode == 504 && time.Since(start) > 1500*time.Millisecond {
				t.Fatalf("504 after %v, want it at the timeout", time.Since(start))
			}
		})
	}
}
