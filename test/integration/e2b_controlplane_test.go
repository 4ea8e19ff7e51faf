package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/e2b"
	"github.com/agent-sandbox/agent-sandbox/internal/e2b/controlplane"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// e2bAPI is E2B's REST API served for the test on the real API server, with the manager's signer.
func e2bAPI(t *testing.T) string {
	t.Helper()
	h, err := controlplane.New(controlplane.Options{Config: env.Config, Signer: scopedSigner, ReadyTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// e2bKeyFor makes an E2B API key in ns: the token of ServiceAccount sa from a token Secret,
// bound to agent-sandbox-e2b-key when withRights.
func e2bKeyFor(t *testing.T, ns, sa string, withRights bool) string {
	t.Helper()
	ctx := context.Background()
	mustCreateObj(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	if withRights {
		shippedClientRole(t, "agent-sandbox-e2b-key")
		mustCreateObj(t, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-sandbox-e2b-key"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		})
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-key",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}}, Type: corev1.SecretTypeServiceAccountToken}
	mustCreateObj(t, secret)
	var token string
	testwrap.Eventually(t, "the key's token", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return err
		}
		if token = string(secret.Data[corev1.ServiceAccountTokenKey]); token == "" {
			return io.EOF
		}
		return nil
	})
	return "e2b_" + token
}

// e2bCall sends method path with body (JSON, or raw bytes) and key, and returns the status and
// the decoded answer (E2B's error shape on failures).
func e2bCall(t *testing.T, api, key, method, path string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, api+path, rd)
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: answer %q is no JSON object", method, path, raw)
		}
	} else if len(raw) > 0 {
		out["list"] = string(raw)
	}
	return resp.StatusCode, out, resp.Header
}

// e2bTenant is a namespace with a warm pool of template "py" (which allows env and runs sandboxd,
// so a create with envVars is served warm) and a key.
func e2bTenant(t *testing.T) (ns, key string) {
	t.Helper()
	ns = newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "py").EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed).
		Containers(testwrap.RuntimeContainer()).Annotation(extv1alpha1.SandboxdContainerAnnotation, "runtime").Obj(),
		testwrap.MakeWarmPool(ns, "py").Template("py").Replicas(1).Obj())
	testwrap.Eventually(t, "warm pool ready", poolReady(t, ns, "py", 1))
	return ns, e2bKeyFor(t, ns, "agent", true)
}

// The lifecycle E2B's SDK drives: create from the warm pool (with metadata, env and a timeout),
// get, list by metadata, set the timeout, pause, connect (resume), kill. The access token opens
// exactly the Sandbox that serves the claim.
func TestE2BControlPlaneLifecycle(t *testing.T) {
	api := e2bAPI(t)
	ns, key := e2bTenant(t)
	code, sb, _ := e2bCall(t, api, key, http.MethodPost, "/v2/sandboxes",
		map[string]any{"templateID": "py", "timeout": 120, "metadata": map[string]string{"run": "r1"}, "envVars": map[string]string{"A": "1"}})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v, want 201", code, sb)
	}
	id, _ := sb["sandboxID"].(string)
	if sb["envdVersion"] != e2b.EnvdVersion || sb["templateID"] != "py" || !strings.HasPrefix(id, "py-") {
		t.Errorf("create answered %v, want a warm member of pool py, template py, envd %s", sb, e2b.EnvdVersion)
	}
	claims, err := scopedSigner.Verify(sb["envdAccessToken"].(string), time.Now())
	if uid := string(getSandbox(t, ns, id).UID); err != nil || claims.Namespace != ns || claims.Name != id || claims.UID != uid {
		t.Errorf("access token opens %+v (%v), want %s/%s uid %s", claims, err, ns, id, uid)
	}

	code, got, _ := e2bCall(t, api, key, http.MethodGet, "/sandboxes/"+id, nil)
	if code != http.StatusOK || got["state"] != "running" || got["metadata"].(map[string]any)["run"] != "r1" {
		t.Errorf("get: %d %v, want running with metadata run=r1", code, got)
	}
	if code, list, _ := e2bCall(t, api, key, http.MethodGet, "/v2/sandboxes?metadata=run%3Dr1", nil); code != 200 || !strings.Contains(list["list"].(string), id) {
		t.Errorf("list by metadata: %d %v, want %s", code, list, id)
	}
	if code, list, _ := e2bCall(t, api, key, http.MethodGet, "/v2/sandboxes?metadata=run%3Dother", nil); code != 200 || list["list"] != "[]\n" {
		t.Errorf("list by other metadata: %d %v, want []", code, list)
	}

	if code, body, _ := e2bCall(t, api, key, http.MethodPost, "/sandboxes/"+id+"/timeout", map[string]any{"timeout": 600}); code != http.StatusNoContent {
		t.Fatalf("timeout: %d %v", code, body)
	}
	claim := claimOf(t, ns, id)
	if end := claim.Spec.Lifecycle.ShutdownTime.Time; time.Until(end) < 590*time.Second || time.Until(end) > 610*time.Second {
		t.Errorf("shutdownTime %s, want about 600 s from now", end)
	}

	if code, body, _ := e2bCall(t, api, key, http.MethodPost, "/sandboxes/"+id+"/pause", nil); code != http.StatusNoContent {
		t.Fatalf("pause: %d %v", code, body)
	}
	if code, _, _ := e2bCall(t, api, key, http.MethodPost, "/sandboxes/"+id+"/pause", nil); code != http.StatusConflict {
		t.Errorf("pause of a paused sandbox: %d, want 409 (the SDK's false)", code)
	}
	code, resumed, _ := e2bCall(t, api, key, http.MethodPost, "/v2/sandboxes/"+id+"/connect", map[string]any{"timeout": 60})
	if code != http.StatusCreated || resumed["sandboxID"] != id {
		t.Errorf("connect to the paused sandbox: %d %v, want 201 (resumed)", code, resumed)
	}
	if code, _, _ := e2bCall(t, api, key, http.MethodPost, "/v2/sandboxes/"+id+"/connect", nil); code != http.StatusOK {
		t.Errorf("connect to a running sandbox: %d, want 200", code)
	}

	if code, body, _ := e2bCall(t, api, key, http.MethodDelete, "/sandboxes/"+id, nil); code != http.StatusNoContent {
		t.Fatalf("kill: %d %v", code, body)
	}
	testwrap.Eventually(t, "the claim is gone", exists(claim, false))
}

// claimOf is the claim that controls Sandbox id.
func claimOf(t *testing.T, ns, id string) *extv1alpha1.SandboxClaim {
	t.Helper()
	owner := metav1.GetControllerOf(getSandbox(t, ns, id))
	if owner == nil {
		t.Fatalf("Sandbox %s has no controller", id)
	}
	return getClaim(t, ns, owner.Name)
}

// A key names its namespace and its RBAC decides: a wrong key is 401, a key without rights 403,
// another tenant's sandbox is not found (404) for every call, and the same calls by its owner
// succeed (the control).
func TestE2BKeysAreTenants(t *testing.T) {
	api := e2bAPI(t)
	nsA, keyA := e2bTenant(t)
	nsB := newNamespace(t)
	keyB := e2bKeyFor(t, nsB, "agent", true)
	noRights := e2bKeyFor(t, nsA, "nobody", false)
	code, sb, _ := e2bCall(t, api, keyA, http.MethodPost, "/v2/sandboxes", map[string]any{"templateID": "py"})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, sb)
	}
	id := sb["sandboxID"].(string)

	for _, tc := range []struct {
		name, key, method, path string
		want                    int
	}{
		{"no key", "", http.MethodGet, "/v2/sandboxes", 401},
		{"a wrong key", "e2b_not-a-token", http.MethodGet, "/v2/sandboxes", 401},
		{"a key without rights creates", noRights, http.MethodPost, "/v2/sandboxes", 403},
		{"another tenant gets it", keyB, http.MethodGet, "/sandboxes/" + id, 404},
		{"another tenant kills it", keyB, http.MethodDelete, "/sandboxes/" + id, 404},
		{"another tenant pauses it", keyB, http.MethodPost, "/sandboxes/" + id + "/pause", 404},
		{"another tenant connects", keyB, http.MethodPost, "/v2/sandboxes/" + id + "/connect", 404},
		{"control: its owner gets it", keyA, http.MethodGet, "/sandboxes/" + id, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.method == http.MethodPost {
				body = map[string]any{"templateID": "py"}
				if strings.Contains(tc.path, "/sandboxes/") {
					body = nil
				}
			}
			code, got, _ := e2bCall(t, api, tc.key, tc.method, tc.path, body)
			if code != tc.want || (code >= 400 && int(got["code"].(float64)) != code) {
				t.Errorf("%d %v, want %d in E2B's error shape", code, got, tc.want)
			}
		})
	}
	if s := getSandbox(t, nsA, id); s.Spec.Replicas != nil && *s.Spec.Replicas == 0 {
		t.Error("another tenant's pause went through")
	}
	if list := sandboxesIn(t, nsB); len(list) != 0 {
		t.Errorf("tenant B's namespace has %d Sandboxes, want none", len(list))
	}
}

// Bad requests get a 4xx saying what is wrong, and leave nothing behind.
func TestE2BControlPlaneRefusesBadInput(t *testing.T) {
	api := e2bAPI(t)
	ns, key := e2bTenant(t)
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   []byte
		want   int
		msg    string
	}{
		{"malformed JSON", "POST", "/v2/sandboxes", []byte(`{"templateID":`), 400, "malformed JSON"},
		{"an unknown field", "POST", "/v2/sandboxes", []byte(`{"templateID":"py","bogus":1}`), 400, "unknown field"},
		{"a wrong type", "POST", "/v2/sandboxes", []byte(`{"templateID":7}`), 400, "malformed JSON"},
		{"a huge body", "POST", "/v2/sandboxes", append([]byte(`{"templateID":"`), bytes.Repeat([]byte("a"), 2<<20)...), 413, "over"},
		{"no template", "POST", "/v2/sandboxes", []byte(`{}`), 400, "templateID"},
		{"a template name that is a path", "POST", "/v2/sandboxes", []byte(`{"templateID":"../py"}`), 400, "templateID"},
		{"an unknown template", "POST", "/v2/sandboxes", []byte(`{"templateID":"nope"}`), 400, `template "nope" not found`},
		{"a zero timeout", "POST", "/v2/sandboxes", []byte(`{"templateID":"py","timeout":0}`), 400, "timeout"},
		{"a timeout over a day", "POST", "/v2/sandboxes", []byte(`{"templateID":"py","timeout":86401}`), 400, "timeout"},
		{"autoPause", "POST", "/v2/sandboxes", []byte(`{"templateID":"py","autoPause":true}`), 400, "autoPause"},
		{"a network config", "POST", "/v2/sandboxes", []byte(`{"templateID":"py","network":{"allowOut":["1.1.1.1"]}}`), 400, "egress"},
		{"a sandbox id that is a path", "GET", "/sandboxes/..%2Fkube-system", nil, 404, "not found"},
		{"an unknown sandbox", "GET", "/sandboxes/nope", nil, 404, `sandbox "nope" not found`},
		{"a bad list state", "GET", "/v2/sandboxes?state=sleeping", nil, 400, "state"},
		{"a bad list limit", "GET", "/v2/sandboxes?limit=0", nil, 400, "limit"},
		{"a template build", "POST", "/v3/templates", []byte(`{}`), 501, "SandboxTemplates"},
		{"a fork of an unknown sandbox", "POST", "/sandboxes/nope/fork", nil, 404, `sandbox "nope" not found`},
		{"a fork of none", "POST", "/sandboxes/nope/fork", []byte(`{"count":0}`), 400, "count must be 1..32, not 0"},
		{"more forks than a node should hold", "POST", "/sandboxes/nope/fork", []byte(`{"count":100}`), 400, "count must be 1..32"},
		{"a snapshot", "POST", "/sandboxes/x/snapshots", nil, 501, "snapshots"},
		{"an unknown path", "GET", "/nothing/here", nil, 404, "no such endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != nil {
				body = tc.body
			}
			code, got, _ := e2bCall(t, api, key, tc.method, tc.path, body)
			if msg, _ := got["message"].(string); code != tc.want || !strings.Contains(msg, tc.msg) {
				t.Errorf("%d %v, want %d with a message containing %q", code, got, tc.want, tc.msg)
			}
		})
	}
	claims := &extv1alpha1.SandboxClaimList{}
	if err := k8s.List(context.Background(), claims, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.DeletionTimestamp.IsZero() {
			t.Errorf("claim %s (template %s) was left behind by a refused create", c.Name, c.Spec.TemplateRef.Name)
		}
	}
}
