package integration

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// TestMetricsEndpointsNeedTheReaderRole: the router's and the controller's /metrics, as their
// binaries build them (--metrics-auth, on by default), against the real API server: a token of a
// ServiceAccount bound to the ClusterRole agent-sandbox-metrics-reader that the install ships
// (config/rbac/metrics_reader_role.yaml) reads them; a tenant's own token, no token and a forged
// one do not.
func TestMetricsEndpointsNeedTheReaderRole(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(sa string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	reader, tenant := token("prometheus"), token("tenant")
	for _, o := range decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "config/rbac/metrics_reader_role.yaml"))) {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-sandbox-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}}}
	mustCreateObj(t, binding)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })

	endpoints := map[string]string{"router": routerMetricsURL(t), "controller": controllerMetricsURL(t)}
	for name, url := range endpoints {
		for _, c := range []struct {
			who, token string
			wantCode   int
		}{
			{"no token", "", http.StatusUnauthorized},
			{"a tenant's token", tenant, http.StatusForbidden},
			{"a forged token", "not-a-token", http.StatusInternalServerError}, // controller-runtime's filter's answer
			{"a metrics reader's token", reader, http.StatusOK},
		} {
			t.Run(name+", "+c.who, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if c.token != "" {
					req.Header.Set("Authorization", "Bearer "+c.token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.wantCode {
					t.Errorf("GET %s with %s: %d %q, want %d", url, c.who, resp.StatusCode, body, c.wantCode)
				}
				if served := strings.Contains(string(body), "# TYPE"); served != (c.wantCode == http.StatusOK) {
					t.Errorf("GET %s with %s (%d): served series = %v", url, c.who, resp.StatusCode, served)
				}
			})
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// routerMetricsURL serves the router's probe port as Run builds it with --metrics-auth.
func routerMetricsURL(t *testing.T) string {
	t.Helper()
	o := router.DefaultOptions()
	filter, err := o.MetricsProtector(rest.CopyConfig(env.Config), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	probes, err := router.ProbeHandler(func() bool { return true }, router.NewMetrics(router.NewSandboxCache(false)), filter)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(probes)
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// controllerMetricsURL runs controller-runtime's metrics server with the options the controller
// binary gives its manager (--metrics-auth).
func controllerMetricsURL(t *testing.T) string {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(manager.MetricsServerOptions("127.0.0.1:0", true), cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
		hc.CloseIdleConnections()
	})
	var addr string
	testwrap.Eventually(t, "the controller's metrics server listening", func() error {
		if addr = srv.(interface{ GetBindAddr() string }).GetBindAddr(); addr == "" {
			return errors.New("no address yet")
		}
		return nil
	})
	return "http://" + addr + "/metrics"
}
