//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// TestTenantCannotReadRouterOrControllerMetrics: the metrics of the router and the controller
// name every tenant's namespaces and traffic. A pod of the tenant's namespace with no
// NetworkPolicy around it (from a raw gVisor sandbox the connection timed out whatever the
// token, which says nothing about the filter) fetches them from their Services and is refused:
// 401 without a token, 403 with the tenant's own token. The control is the same fetch with the
// token of an identity bound to the ClusterRole agent-sandbox-metrics-reader, which gets the
// series: the refusals are the filter's, not an unreachable port. The request is written with nc,
// by address: the image's static busybox wget crashes on this runtime.
func TestTenantCannotReadRouterOrControllerMetrics(t *testing.T) {
	ctx := t.Context()
	if err := kube.Get(ctx, client.ObjectKey{Namespace: spec.SystemNS, Name: "sandbox-router"}, &appsv1.Deployment{}); apierrors.IsNotFound(err) {
		t.Skip("the controller and router run as host processes (devcluster up --host-processes): no metrics Service to reach")
	}
	ns := newNamespace(t, "metrics")
	cfg := tenantConfig(t, ns)
	mustf(t, kube.Create(ctx, clientPod(ns, "prober", "default")), "creating the prober pod")
	waitPodReady(t, ns, "prober")
	readerToken := metricsReaderToken(t, ns)

	targets := []struct {
		name, service string
		port          int
		series        string
	}{
		{"router", "sandbox-router-svc", 8081, "sandbox_router_build_info"},
		{"controller", "agent-sandbox-controller", 8080, "controller_runtime_"},
		{"conversion webhook", "agent-sandbox-controller", 8083, "go_goroutines"},
	}
	tokens := []struct {
		who, token string
		want       string // the HTTP status, or "" for the series
	}{
		{"no token", "", "401 Unauthorized"},
		{"the tenant's token", cfg.BearerToken, "403 Forbidden"},
		{"a metrics reader's token (control)", readerToken, ""},
	}
	for _, target := range targets {
		addr := serviceAddr(t, target.service, target.port)
		for _, tok := range tokens {
			t.Run(target.name+" with "+tok.who, func(t *testing.T) {
				out := httpGetFromPod(t, ns, "prober", addr, "/metrics", tok.token)
				status, _, _ := strings.Cut(out, "\n")
				switch {
				case tok.want != "" && (!strings.Contains(status, tok.want) || strings.Contains(out, target.series)):
					t.Errorf("%s's metrics from a tenant's pod with %s: %q, want refused with %s", target.name, tok.who, status, tok.want)
				case tok.want == "" && !strings.Contains(out, target.series):
					t.Errorf("%s's metrics with %s: %q, want the series %s", target.name, tok.who, status, target.series)
				}
			})
		}
	}
}

// serviceAddr is host:port of a Service of the system namespace, by its cluster IP.
func serviceAddr(t *testing.T, name string, port int) string {
	t.Helper()
	svc := &corev1.Service{}
	mustf(t, kube.Get(t.Context(), client.ObjectKey{Namespace: spec.SystemNS, Name: name}, svc), "reading Service %s", name)
	return fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, port)
}

// httpGetFromPod sends GET path to addr from the pod with nc (HTTP/1.0, so the server closes the
// connection when it has answered) and returns the answer, status line first; bearer is sent
// when not empty.
func httpGetFromPod(t *testing.T, ns, pod, addr, path, bearer string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	req := "GET " + path + " HTTP/1.0\\r\\nHost: " + host + "\\r\\n"
	if bearer != "" {
		req += "Authorization: Bearer " + bearer + "\\r\\n"
	}
	// stdin stays open a moment after the request: nc's end of input would close the connection's
	// write side, which cancels the request's context (and its TokenReview) in a Go server.
	return podOut(t, ns, pod, "sh", "-c", "(printf '"+req+"\\r\\n'; sleep 3) | nc -w 10 "+host+" "+port)
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
