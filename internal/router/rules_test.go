package router

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// The routing rules of the real cache and proxy together: only declared (or allowlisted) ports,
// never a host-network Sandbox, never an unclaimed pool member, and scoped tokens bound to one
// Sandbox object. Every Sandbox here is at 127.0.0.1, where the stand-ins listen.

const poolAPI = "extensions.agents.x-k8s.io/v1alpha1"

// routable is a ready Sandbox default/name at 127.0.0.1 with uid, declaring ports.
func routable(name string, uid types.UID, ports ...uint16) *agentsv1beta1.Sandbox {
	sb := sandbox(DefaultNamespace, name, metav1.ConditionTrue, agentsv1beta1.ReasonReady, "127.0.0.1")
	sb.UID = uid
	c := corev1.Container{Name: "main"}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: int32(p)})
	}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{c}
	return sb
}

var loopback2 = netip.MustParseAddr("127.0.0.2")

// newRulesRouter starts a router with the port rule on, in front of cache; it returns its URL.
func newRulesRouter(t *testing.T, cache Resolver, o ProxyOptions, g GuardOptions) string {
	t.Helper()
	o.Resolver, o.DeclaredPortsOnly = cache, true
	return newRouterServer(t, NewProxy(o), g)
}

func newRouterServer(t *testing.T, p *Proxy, g GuardOptions) string {
	t.Helper()
	srv := httptest.NewServer(NewHandler(HandlerOptions{Proxy: p, Guard: g}))
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
	return srv.URL
}

// call sends GET / to the router for default/id on port, with token as bearer when set, and
// returns the status and the body, or the detail when the router answered itself.
func call(ctx context.Context, c *http.Client, router, id string, port uint16, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, router+"/", nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set(HeaderSandboxID, id)
	req.Header.Set(HeaderSandboxPort, strconv.Itoa(int(port)))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	var d struct{ Detail string }
	if resp.Header.Get("Content-Type") == "application/json" && json.Unmarshal(body, &d) == nil && d.Detail != "" {
		return resp.StatusCode, d.Detail, nil
	}
	return resp.StatusCode, string(body), nil
}

func get(t *testing.T, router, id string, port uint16, token string) (int, string) {
	t.Helper()
	code, body, err := call(testCtx(t), h1Client(t), router, id, port, token)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// signedPayload signs an arbitrary payload in the scoped token wire form, for tokens Mint no
// longer makes.
func signedPayload(secret []byte, payload string) string {
	body := scopedtoken.Prefix + base64.RawURLEncoding.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestRoutingRules(t *testing.T) {
	_, declaredStr := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "declared") }))
	_, allowedStr := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "allowlisted") }))
	declared, allowed := mustPort(t, declaredStr), mustPort(t, allowedStr)

	cache := NewSandboxCache(true)
	pending := routable("pending", "uid-p", declared)
	pending.Status.Conditions[0].Status, pending.Status.Conditions[0].Reason = metav1.ConditionFalse, agentsv1beta1.ReasonPodPending
	for _, sb := range []*agentsv1beta1.Sandbox{
		routable("sb", "uid-1", declared),
		routable("bare", "uid-2"),
		pending,
		hostNetwork(routable("hostnet", "uid-3", declared)),
		ownedBy(routable("member", "uid-4", declared), poolAPI, "SandboxWarmPool", true),
	} {
		cache.OnAdd(sb, true)
	}
	router := newRulesRouter(t, cache, ProxyOptions{AllowedPorts: []uint16{allowed}}, GuardOptions{})
	tests := []struct {
		name     string
		id       string
		port     uint16
		wantCode int
		want     string // the body, or the detail of the router's own answer
	}{
		{"a declared port", "sb", declared, 200, "declared"},
		{"an allowlisted port the Sandbox does not declare", "bare", allowed, 200, "allowlisted"},
		{"the kubelet's port", "sb", 10250, 403, "Port 10250 is not declared by the containers of sandbox default/sb."},
		{"an API server's port", "sb", 36443, 403, "Port 36443 is not declared by the containers of sandbox default/sb."},
		{"port 1", "sb", 1, 403, "Port 1 is not declared by the containers of sandbox default/sb."},
		{"port 65535", "sb", 65535, 403, "Port 65535 is not declared by the containers of sandbox default/sb."},
		{"a port another Sandbox declares", "bare", declared, 403, "Port " + declaredStr + " is not declared by the containers of sandbox default/bare."},
		{"an undeclared port of an unready Sandbox is refused, not retried", "pending", 10250, 403,
			"Port 10250 is not declared by the containers of sandbox default/pending."},
		{"a declared port of an unready Sandbox", "pending", declared, 503, "sandbox default/pending is not ready (PodPending)"},
		{"host network, even on a declared port", "hostnet", declared, 403,
			"sandbox default/hostnet uses the node's network (hostNetwork); the router never routes to it"},
		{"an unclaimed pool member", "member", declared, 404,
			"sandbox default/member is an unclaimed warm pool member; it is routable once a SandboxClaim takes it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, got := get(t, router, tt.id, tt.port, "")
			if code != tt.wantCode || got != tt.want {
				t.Fatalf("got %d %q, want %d %q", code, got, tt.wantCode, tt.want)
			}
		})
	}
}

// Without the rule (resolvers that know no pod spec, as in other tests), every port goes.
func TestPortRuleOff(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	cache := NewSandboxCache(true)
	cache.OnAdd(routable("bare", "uid"), true)
	router := newRouterServer(t, NewProxy(ProxyOptions{Resolver: cache}), GuardOptions{})
	if code, body := get(t, router, "bare", mustPort(t, port), ""); code != 200 {
		t.Fatalf("got %d %q, want 200: DeclaredPortsOnly is off", code, body)
	}
}

// waitForWaiter blocks until a request waits on the cache for default/name.
func waitForWaiter(t *testing.T, c *SandboxCache, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.RLock()
		_, waiting := c.waiters[cacheKey{DefaultNamespace, name}]
		c.mu.RUnlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request ever waited for default/%s", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// A client that saw its claim's status may call before the router's watch delivered the
// adoption: the request waits for it instead of failing, and a pool member nobody claims is
// refused once the wait is over.
func TestUnclaimedMemberWaitsForItsClaim(t *testing.T) {
	_, portStr := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "claimed") }))
	port := mustPort(t, portStr)
	member := func() *agentsv1beta1.Sandbox {
		return ownedBy(routable("member", "uid-m", port), poolAPI, "SandboxWarmPool", true)
	}
	claimed := ownedBy(routable("member", "uid-m", port), poolAPI, "SandboxClaim", true)
	const unclaimed = "sandbox default/member is an unclaimed warm pool member; it is routable once a SandboxClaim takes it"
	tests := []struct {
		name     string
		wait     time.Duration
		event    func(c *SandboxCache) // delivered while the request waits; nil: none
		wantCode int
		want     string
	}{
		{"the adoption arrives while the request waits", time.Minute, func(c *SandboxCache) { c.OnUpdate(member(), claimed) }, 200, "claimed"},
		{"an update that does not claim the member keeps the request waiting", time.Minute, func(c *SandboxCache) {
			c.OnUpdate(member(), member())
			c.OnUpdate(member(), claimed)
		}, 200, "claimed"},
		{"the member is deleted while the request waits", time.Minute, func(c *SandboxCache) { c.OnDelete(member()) }, 404, "sandbox default/member not found"},
		{"no claim within the wait", 20 * time.Millisecond, nil, 404, unclaimed},
		{"no wait configured", 0, nil, 404, unclaimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := NewSandboxCache(true)
			cache.OnAdd(member(), true)
			router := newRulesRouter(t, cache, ProxyOptions{UnclaimedWait: tt.wait}, GuardOptions{})
			type answer struct {
				code int
				body string
			}
			done := make(chan answer, 1)
			start := time.Now()
			ctx, client := testCtx(t), h1Client(t)
			go func() {
				code, body, err := call(ctx, client, router, "member", port, "")
				if err != nil {
					body = err.Error()
				}
				done <- answer{code, body}
			}()
			if tt.event != nil {
				waitForWaiter(t, cache, "member")
				tt.event(cache)
			}
			got := <-done
			if got.code != tt.wantCode || got.body != tt.want {
				t.Fatalf("got %d %q, want %d %q", got.code, got.body, tt.wantCode, tt.want)
			}
			if tt.event == nil && time.Since(start) < tt.wait {
				t.Errorf("answered after %v, want no sooner than the %v wait", time.Since(start), tt.wait)
			}
		})
	}
}

// A client that gives up ends the wait at once.
func TestUnclaimedWaitEndsWithTheRequest(t *testing.T) {
	cache := NewSandboxCache(true)
	cache.OnAdd(ownedBy(routable("member", "uid-m", 8888), poolAPI, "SandboxWarmPool", true), true)
	p := NewProxy(ProxyOptions{Resolver: cache, UnclaimedWait: time.Hour})
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p.resolve(ctx, Route{Namespace: DefaultNamespace, Name: "member", Port: 8888})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unclaimed") {
			t.Fatalf("err = %v, want the unclaimed refusal", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("resolve kept waiting after the request's context ended")
	}
}

// A scoped token opens the Sandbox object it was minted for: a later Sandbox that reuses the
// name is refused, and a token minted before tokens bound a UID opens nothing.
func TestScopedTokenBindsTheSandboxUID(t *testing.T) {
	_, portStr := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "reached") }))
	port := mustPort(t, portStr)
	secret := []byte(strings.Repeat("k", scopedtoken.MinSecretLen))
	signer, err := scopedtoken.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	cache := NewSandboxCache(true)
	pending := routable("pending", "uid-p", port)
	pending.Status.Conditions[0].Status, pending.Status.Conditions[0].Reason = metav1.ConditionFalse, agentsv1beta1.ReasonPodPending
	cache.OnAdd(routable("sb", "uid-now", port), true)
	cache.OnAdd(pending, true)
	guard := GuardOptions{Authenticator: access.NewScopedTokenAuthenticator(signer, nil), Authorizer: access.NewSandboxAuthorizer(nil, 0, 0, 0, 1)}
	router := newRulesRouter(t, cache, ProxyOptions{}, guard)
	exp := time.Now().Add(time.Hour).Unix()
	mint := func(name, uid string) string {
		tok, err := signer.Mint(scopedtoken.Claims{Namespace: DefaultNamespace, Name: name, UID: uid, Expires: exp})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tests := []struct {
		name     string
		id       string
		token    string
		wantCode int
		want     string
	}{
		{"the Sandbox it was minted for", "sb", mint("sb", "uid-now"), 200, "reached"},
		{"an earlier Sandbox of the same name", "sb", mint("sb", "uid-before"), 403,
			"This token opens an earlier sandbox named default/sb, not the one that has the name now."},
		{"an earlier Sandbox whose successor is not ready yet: refused, not told to retry", "pending", mint("pending", "uid-before"), 403,
			"This token opens an earlier sandbox named default/pending, not the one that has the name now."},
		{"another Sandbox", "sb", mint("other", "uid-now"), 403, "This token opens sandbox default/other only, not default/sb."},
		{"minted before tokens bound a UID", "sb", signedPayload(secret, `{"ns":"default","name":"sb","exp":`+strconv.FormatInt(exp, 10)+`}`), 401,
			"Invalid bearer token."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, got := get(t, router, tt.id, port, tt.token)
			if code != tt.wantCode || got != tt.want {
				t.Fatalf("got %d %q, want %d %q", code, got, tt.wantCode, tt.want)
			}
		})
	}
}

// A retried dial follows the cache to a replaced pod of the same Sandbox, never to another
// Sandbox that took the name meanwhile.
func TestRetryStaysWithTheSandboxItResolved(t *testing.T) {
	reached := make(chan struct{}, 1)
	_, port := newUpstream(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached <- struct{}{} }))
	res := &stubResolver{
		// Nothing listens on 127.0.0.2: the first dial is refused.
		targets: map[string]Target{"default/sb": {Addr: loopback2, UID: "uid-1"}},
		next:    map[string]Target{"default/sb": {Addr: loopback.Addr, UID: "uid-2"}},
	}
	router := newRouterServer(t, NewProxy(ProxyOptions{Resolver: res, DialRetries: 2, RetryBackoff: time.Millisecond}), GuardOptions{})
	code, got := get(t, router, "sb", mustPort(t, port), "")
	if code != http.StatusBadGateway || got != "Could not connect to the backend sandbox: sb" {
		t.Fatalf("got %d %q, want the 502 of the refused dial", code, got)
	}
	select {
	case <-reached:
		t.Fatal("the retry reached the new Sandbox of the same name")
	default:
	}
}
