package router

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
)

// fakeSARs answers SubjectAccessReviews from grants keyed "user verb resource[/sub].group ns/name",
// like RBAC would, and records the questions asked.
type fakeSARs struct {
	mu     sync.Mutex
	grants map[string]bool
	err    error
	asked  []string
}

func sarKey(user, verb, res, ns, name string) string {
	return user + " " + verb + " " + res + " " + ns + "/" + name
}

func (f *fakeSARs) Create(_ context.Context, r *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := r.Spec.ResourceAttributes
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Group != "" {
		res += "." + a.Group
	}
	q := sarKey(r.Spec.User, a.Verb, res, a.Namespace, a.Name)
	f.asked = append(f.asked, a.Verb+" "+res)
	if f.err != nil {
		return nil, f.err
	}
	out := r.DeepCopy()
	out.Status.Allowed = f.grants[q]
	return out, nil
}

func (f *fakeSARs) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

const (
	sbProxy   = "create sandboxes/proxy.agents.x-k8s.io"
	sbPatch   = "patch sandboxes.agents.x-k8s.io"
	sbUpdate  = "update sandboxes.agents.x-k8s.io"
	podPortFw = "create pods/portforward"
	workerSA  = "system:serviceaccount:team:worker"
	// controllerSA holds the held rights on every Sandbox, as the controller's ServiceAccount does.
	controllerSA = "system:serviceaccount:agent-sandbox-system:agent-sandbox-controller"
	systemNS     = "agent-sandbox-system" // the router's own namespace
)

// excludedNamespaces are a router's in agent-sandbox-system with the flag's default.
var excludedNamespaces = append(append([]string(nil), access.DefaultExcludedNamespaces...), systemNS)

// identityGuard is the guard of --auth-mode tokenreview --authorize --identify-pods over pods,
// with the token "alice-token" belonging to alice, in front of a handler that answers 200.
func identityGuard(sars *fakeSARs, pods *access.PodCache, clk clock.PassiveClock) http.Handler {
	authn := access.NewTokenReviewAuthenticator(&accesstest.TokenReviewer{Users: map[string]string{"alice-token": "alice", "controller-token": controllerSA}},
		time.Minute, 0, 16)
	g := GuardOptions{Authenticator: authn, Pods: pods, HeldRights: true,
		Authorizer: access.NewSandboxAuthorizer(&access.HeldRightsReviewer{Client: sars}, 10*time.Second, 2*time.Second, 0, 64)}
	return guard(g, NewMetrics(nil), slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
}

// identityRequest is a request routed to team/sb from remote, with an optional token.
func identityRequest(remote, token string) *http.Request {
	r := httptest.NewRequest("GET", "http://router/", nil)
	r.RemoteAddr = remote
	r.Header.Set(HeaderSandboxID, "sb")
	r.Header.Set(HeaderSandboxNamespace, "team")
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// The decision table of --identify-pods: who the caller is, which rights it holds on team/sb,
// what it gets and which reviews were asked (in order, stopping at the first allow).
func TestIdentifyPodsDecisionTable(t *testing.T) {
	pods := []*corev1.Pod{
		accesstest.Pod("team", "worker-1", "worker", "Running", false, "10.0.0.1", "fd00::1"),
		accesstest.Pod("team", "nosa", "", "Running", false, "10.0.0.2"),
		accesstest.Pod("other", "intruder", "worker", "Running", false, "10.0.0.3"),
		accesstest.Pod("kube-system", "agent", "node-agent", "Running", true, "192.168.1.10"),
		accesstest.Pod("team", "twin-a", "worker", "Running", false, "10.0.0.4"),
		accesstest.Pod("team", "twin-b", "worker", "Running", false, "10.0.0.4"),
		accesstest.Pod("team", "starting", "worker", "Pending", false, "10.0.0.5"),
		accesstest.Terminating(accesstest.Pod("team", "leaving", "worker", "Running", false, "10.0.0.6")),
		accesstest.Pod(systemNS, "controller", "agent-sandbox-controller", "Running", false, "10.0.1.1"),
		accesstest.Pod("kube-system", "coredns", "coredns", "Running", false, "10.0.1.2"),
		accesstest.Pod("kube-node-lease", "p", "default", "Running", false, "10.0.1.3"),
		accesstest.Pod("kube-public", "p", "default", "Running", false, "10.0.1.4"),
	}
	controllerGrants := []string{sarKey(controllerSA, "patch", "sandboxes.agents.x-k8s.io", "team", "sb"),
		sarKey("system:serviceaccount:kube-system:coredns", "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}
	mustSendAToken := []string{"whose pods are never named by their address: they must send a bearer token"}
	all := []string{sbProxy, sbPatch, sbUpdate, podPortFw}
	tests := []struct {
		name       string
		remote     string
		token      string
		grants     []string // sarKey grants
		sarErr     error
		wantCode   int
		wantDetail []string
		wantAsked  []string
	}{
		{name: "token caller with the proxy subresource", remote: "10.9.9.9:1", token: "alice-token",
			grants: []string{sarKey("alice", "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 200, wantAsked: all[:1]},
		{name: "token caller with patch on the Sandbox", remote: "10.9.9.9:1", token: "alice-token",
			grants: []string{sarKey("alice", "patch", "sandboxes.agents.x-k8s.io", "team", "sb")}, wantCode: 200, wantAsked: all[:2]},
		{name: "token caller without rights", remote: "10.9.9.9:1", token: "alice-token",
			wantCode: 403, wantDetail: []string{`User "alice" may not reach sandbox team/sb`, strings.Join(all, ", ")}, wantAsked: all},
		{name: "invalid token from a pod is not the pod", remote: "10.0.0.1:1", token: "wrong",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 401},
		{name: "pod with the proxy subresource", remote: "10.0.0.1:1",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 200, wantAsked: all[:1]},
		{name: "pod with patch on the Sandbox", remote: "10.0.0.1:1",
			grants: []string{sarKey(workerSA, "patch", "sandboxes.agents.x-k8s.io", "team", "sb")}, wantCode: 200, wantAsked: all[:2]},
		{name: "pod with update on the Sandbox", remote: "10.0.0.1:1",
			grants: []string{sarKey(workerSA, "update", "sandboxes.agents.x-k8s.io", "team", "sb")}, wantCode: 200, wantAsked: all[:3]},
		{name: "pod with port-forward on the Sandbox's pod", remote: "10.0.0.1:1",
			grants: []string{sarKey(workerSA, "create", "pods/portforward", "team", "sb")}, wantCode: 200, wantAsked: all},
		{name: "pod by its IPv6 address", remote: "[fd00::1]:1",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 200, wantAsked: all[:1]},
		{name: "pod without a serviceAccountName is its namespace's default", remote: "10.0.0.2:1",
			grants: []string{sarKey("system:serviceaccount:team:default", "create", "pods/portforward", "team", "sb")}, wantCode: 200, wantAsked: all},
		{name: "pod without rights", remote: "10.0.0.1:1",
			grants: []string{sarKey(workerSA, "get", "sandboxes.agents.x-k8s.io", "team", "sb")}, wantCode: 403,
			wantDetail: []string{`User "system:serviceaccount:team:worker" (pod team/worker-1) may not reach sandbox team/sb`, strings.Join(all, ", ") + " on team/sb"},
			wantAsked:  all},
		{name: "pod with rights on another Sandbox only", remote: "10.0.0.1:1",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "other")}, wantCode: 403, wantAsked: all},
		{name: "pod of another namespace, same ServiceAccount name", remote: "10.0.0.3:1",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 403,
			wantDetail: []string{"system:serviceaccount:other:worker"}, wantAsked: all},
		{name: "host-network pod is anonymous", remote: "192.168.1.10:1",
			grants: []string{sarKey("system:serviceaccount:kube-system:node-agent", "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 401},
		{name: "unknown IP is anonymous", remote: "10.9.9.9:1", wantCode: 401},
		{name: "IP shared by two live pods is anonymous", remote: "10.0.0.4:1",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 401},
		{name: "pod not Running is anonymous", remote: "10.0.0.5:1",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 401},
		{name: "pod being deleted is anonymous", remote: "10.0.0.6:1",
			grants: []string{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb")}, wantCode: 401},
		{name: "API server unreachable fails closed", remote: "10.0.0.1:1", sarErr: errors.New("connection refused"),
			wantCode: 503, wantAsked: all[:1]},
		{name: "pod of the router's namespace (the controller) without a token is refused", remote: "10.0.1.1:1",
			grants: controllerGrants, wantCode: 401, wantDetail: append([]string{"namespace " + systemNS}, mustSendAToken...)},
		{name: "pod of kube-system without a token is refused", remote: "10.0.1.2:1",
			grants: controllerGrants, wantCode: 401, wantDetail: append([]string{"namespace kube-system"}, mustSendAToken...)},
		{name: "pod of kube-node-lease without a token is refused", remote: "10.0.1.3:1", wantCode: 401, wantDetail: mustSendAToken},
		{name: "pod of kube-public without a token is refused", remote: "10.0.1.4:1", wantCode: 401, wantDetail: mustSendAToken},
		{name: "pod of the router's namespace with its token is let in on its rights", remote: "10.0.1.1:1", token: "controller-token",
			grants: controllerGrants, wantCode: 200, wantAsked: all[:2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := access.NewPodCache(false, excludedNamespaces...)
			for _, p := range pods {
				cache.OnAdd(p.DeepCopy(), true)
			}
			sars := &fakeSARs{grants: map[string]bool{}, err: tt.sarErr}
			for _, g := range tt.grants {
				sars.grants[g] = true
			}
			rec := httptest.NewRecorder()
			identityGuard(sars, cache, clock.RealClock{}).ServeHTTP(rec, identityRequest(tt.remote, tt.token))
			var body struct{ Detail string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil && rec.Code != 200 {
				t.Fatalf("code %d with an undecodable body %q", rec.Code, rec.Body)
			}
			if rec.Code != tt.wantCode {
				t.Fatalf("code = %d, want %d (%s)", rec.Code, tt.wantCode, body)
			}
			for _, d := range tt.wantDetail {
				if !strings.Contains(body.Detail, d) {
					t.Errorf("detail %q does not contain %q", body.Detail, d)
				}
			}
			if got := sars.questions(); strings.Join(got, "|") != strings.Join(tt.wantAsked, "|") {
				t.Errorf("reviews asked = %q, want %q", got, tt.wantAsked)
			}
		})
	}
}

// Only the connection's source address names a pod: headers a caller writes do not.
func TestIdentifyPodsIgnoresForwardingHeaders(t *testing.T) {
	cache := access.NewPodCache(false)
	cache.OnAdd(accesstest.Pod("team", "worker-1", "worker", "Running", false, "10.0.0.1"), true)
	sars := &fakeSARs{grants: map[string]bool{sarKey(workerSA, "create", "sandboxes/proxy.agents.x-k8s.io", "team", "sb"): true}}
	for _, h := range []struct{ name, value string }{
		{"X-Forwarded-For", "10.0.0.1"},
		{"X-Real-IP", "10.0.0.1"},
		{"Forwarded", "for=10.0.0.1"},
	} {
		t.Run(h.name, func(t *testing.T) {
			r := identityRequest("10.9.9.9:1", "")
			r.Header.Set(h.name, h.value)
			rec := httptest.NewRecorder()
			identityGuard(sars, cache, clock.RealClock{}).ServeHTTP(rec, r)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("spoofed %s: %s from an unknown IP got %d, want 401 (%s)", h.name, h.value, rec.Code, rec.Body)
			}
		})
	}
	if q := sars.questions(); len(q) != 0 {
		t.Fatalf("a spoofed header led to reviews %q", q)
	}
}

// A pod identity's decision is cached per (user, groups, sandbox): a repeat asks nothing.
func TestIdentifyPodsCachesDecisions(t *testing.T) {
	cache := access.NewPodCache(false)
	cache.OnAdd(accesstest.Pod("team", "worker-1", "worker", "Running", false, "10.0.0.1"), true)
	cache.OnAdd(accesstest.Pod("team", "worker-2", "worker", "Running", false, "10.0.0.2"), true)
	sars := &fakeSARs{grants: map[string]bool{sarKey(workerSA, "update", "sandboxes.agents.x-k8s.io", "team", "sb"): true}}
	h := identityGuard(sars, cache, clock.RealClock{})
	for _, remote := range []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.2:1"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, identityRequest(remote, ""))
		if rec.Code != 200 {
			t.Fatalf("%s: code %d (%s)", remote, rec.Code, rec.Body)
		}
	}
	if q := sars.questions(); len(q) != 3 {
		t.Fatalf("reviews asked = %q, want the three of one decision (two pods of one ServiceAccount share it)", q)
	}
}
