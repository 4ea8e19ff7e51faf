//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
)

// TestTenantCannotReadRouterOrControllerMetrics: the metrics of the router and the controller
// name every tenant's namespaces and traffic. Code in a tenant's sandbox fetches them from their
// Services (busybox wget, run through the router as the tenant) and is refused: 401 without a
// token, 403 with the tenant's own token. The control is the same fetch with the token of an
// identity bound to the ClusterRole agent-sandbox-metrics-reader, which gets the series: the
// refusals are the filter's, not an unreachable port.
func TestTenantCannotReadRouterOrControllerMetrics(t *testing.T) {
	ctx := t.Context()
	if err := kube.Get(ctx, client.ObjectKey{Namespace: devcluster.SystemNS, Name: "sandbox-router"}, &appsv1.Deployment{}); apierrors.IsNotFound(err) {
		t.Skip("the controller and router run as host processes (devcluster up --host-processes): no metrics Service to reach")
	}
	ns := newNamespace(t, "metrics")
	cfg := tenantConfig(t, ns)
	mustf(t, clientAs(t, cfg).Create(ctx, runtimeSandbox(ns, "prober")), "tenant: creating a raw sandbox")
	waitPodReady(t, ns, "prober")
	readerToken := metricsReaderToken(t, ns)

	svc := func(name string, port int) string {
		return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d/metrics", name, devcluster.SystemNS, port)
	}
	targets := []struct{ name, url, series string }{
		{"router", svc("sandbox-router-svc", 8081), "sandbox_router_build_info"},
		{"controller", svc("agent-sandbox-controller", 8080), "controller_runtime_"},
		{"conversion webhook", svc("agent-sandbox-controller", 8083), "go_goroutines"},
	}
	tokens := []struct {
		who, token string
		want       string // the HTTP status line busybox wget reports, or "" for the series
	}{
		{"no token", "", "401 Unauthorized"},
		{"the tenant's token", cfg.BearerToken, "403 Forbidden"},
		{"a metrics reader's token (control)", readerToken, ""},
	}
	for _, target := range targets {
		for _, tok := range tokens {
			t.Run(target.name+" with "+tok.who, func(t *testing.T) {
				out := wgetInSandbox(t, cfg.BearerToken, ns, "prober", target.url, tok.token)
				switch {
				case tok.want != "" && (!strings.Contains(out, tok.want) || strings.Contains(out, target.series)):
					t.Errorf("%s's metrics from a tenant's sandbox with %s: %q, want refused with %s", target.name, tok.who, out, tok.want)
				case tok.want == "" && !strings.Contains(out, target.series):
					t.Errorf("%s's metrics with %s: %q, want the series %s", target.name, tok.who, out, target.series)
				}
			})
		}
	}
}

// metricsReaderToken is a token of a ServiceAccount of ns bound to agent-sandbox-metrics-reader,
// as a Prometheus would be.
func metricsReaderToken(t *testing.T, ns string) string {
	t.Helper()
	cfg := asServiceAccount(t, ns, "scraper", nil, nil)
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-sandbox-metrics-reader"}}
	mustf(t, kube.Create(t.Context(), crb), "binding agent-sandbox-metrics-reader")
	t.Cleanup(func() { _ = kube.Delete(t.Context(), crb) })
	return cfg.BearerToken
}

// wgetInSandbox runs busybox wget in the sandbox (through the router's legacy /execute, as the
// tenant) and returns what it printed: the body, or its error naming the HTTP status.
func wgetInSandbox(t *testing.T, tenantToken, ns, sandbox, url, bearer string) string {
	t.Helper()
	cmd := "wget -q -T 10 -O- "
	if bearer != "" {
		cmd += "--header 'Authorization: Bearer " + bearer + "' "
	}
	cmd += url + " 2>&1"
	body, _ := json.Marshal(map[string]string{"command": cmd})
	code, out, err := routerPostAs(t.Context(), tenantToken, ns, sandbox, "/execute", string(body))
	if err != nil || code != http.StatusOK {
		t.Fatalf("running wget in %s/%s as the tenant: %d %s %v", ns, sandbox, code, out, err)
	}
	var res struct{ Stdout, Stderr string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("the sandbox's answer %q: %v", out, err)
	}
	return res.Stdout + res.Stderr
}
