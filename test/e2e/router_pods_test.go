//go:build e2e

package e2e

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The router as the integrators' unchanged clients meet it on a default install: they send no
// token from their pods, and the router names them by the pod their connection comes from and
// lets them in on a right they already hold (docs/security.md, "Who may use the router").

//go:embed testdata/incluster_client.py
var inClusterClient string

const (
	upstreamRouterURL   = "http://sandbox-router-svc.agent-sandbox-system.svc.cluster.local:8080" // upstream SDKs' default
	taskWorkerRouterURL = "http://agent-sandbox-router.agent-sandbox-system.svc:8080"             // the task workers' docs
)

// routerResult is the in-cluster client's last line.
type routerResult struct {
	Code int    `json:"code"`
	Body string `json:"body"`
}

// clientPod starts a plain pod of the runtime image (python3, busybox) running as the
// ServiceAccount sa, with that account's token mounted, as an integrator's server runs.
func clientPod(ns, name, sa string, mutate ...func(*corev1.PodSpec)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName:            sa,
			AutomountServiceAccountToken:  ptr.To(true),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "runtime", Image: runtimeContainer().Image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"}}},
		},
	}
	for _, m := range mutate {
		m(&pod.Spec)
	}
	return pod
}

// fromPod runs the in-cluster client in a pod and returns the router's answer; a client that
// could not get an answer (no connection) fails with its error.
func fromPod(t *testing.T, ns, pod string, args ...string) (routerResult, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := kubeExec(t.Context(), ns, pod, "runtime", append([]string{"python3", "-c", inClusterClient}, args...), &out, &errOut)
	if err != nil {
		return routerResult{}, &clientError{err: err, stderr: errOut.String()}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res routerResult
	mustf(t, json.Unmarshal([]byte(lines[len(lines)-1]), &res), "decoding the client's output %q (stderr %q)", out.String(), errOut.String())
	return res, nil
}

type clientError struct {
	err    error
	stderr string
}

func (e *clientError) Error() string { return e.err.Error() + ": " + e.stderr }

// fromNode sends the request from the host with no token, as a process on the node would.
func fromNode(t *testing.T, ns, sandbox string) routerResult {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, cluster.RouterURL+"/execute", strings.NewReader(`{"command":"echo hi"}`))
	req.Header.Set("X-Sandbox-ID", sandbox)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", "8888")
	resp, err := http.DefaultClient.Do(req)
	mustf(t, err, "request from the node")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return routerResult{Code: resp.StatusCode, Body: string(b)}
}

func TestRouterNamesTokenlessPodsAndLetsInTheRightsTheyHold(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns, other, hostNS := newNamespace(t, "rtr"), newNamespace(t, "rtr-other"), newNamespace(t, "rtr-host")
	nsObj := &corev1.Namespace{}
	mustf(t, kube.Get(ctx, client.ObjectKey{Name: hostNS}, nsObj), "reading namespace")
	metav1.SetMetaDataLabel(&nsObj.ObjectMeta, "agents.x-k8s.io/host-access", "allowed")
	mustf(t, kube.Update(ctx, nsObj), "admin opting %s in to host access", hostNS)

	createTemplate(t, ns, "cognition-sandbox", false)
	asServiceAccount(t, ns, "cognition", agentServerRole, nil)
	asServiceAccount(t, ns, "task-worker", taskWorkerRole, nil)
	asServiceAccount(t, ns, "bystander", nil, nil)
	asServiceAccount(t, other, "cognition", agentServerRole, nil)
	mustf(t, kube.Create(ctx, testwrap.MakeClaim(ns, "target").Template("cognition-sandbox").WarmPool("none").Obj()), "admin: a claim to aim at")
	pods := []*corev1.Pod{
		clientPod(ns, "session-agent", "cognition"),
		clientPod(ns, "task-job", "task-worker"),
		clientPod(ns, "bystander", "bystander"),
		clientPod(other, "outsider", "cognition"),
		clientPod(hostNS, "on-the-node", "default", func(s *corev1.PodSpec) {
			s.HostNetwork, s.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
		}),
	}
	for _, p := range pods {
		mustf(t, kube.Create(ctx, p), "creating pod %s/%s", p.Namespace, p.Name)
	}
	ip := podIPs(t, ns, "session-agent", "task-job", "bystander", "target")
	podIPs(t, other, "outsider")
	podIPs(t, hostNS, "on-the-node")
	// A tenant's sandbox that will try to take session-agent's address. Asking for NET_ADMIN is
	// refused at admission (TestAttacksByTenants); it tries without.
	mustf(t, kube.Create(ctx, harnessSandbox(ns, "impostor", nil).Obj()), "creating sandbox impostor")
	podIPs(t, ns, "impostor")

	allowed := []struct {
		name, pod, flow, claim, router string
	}{
		{"an agent session from a pod holding exactly its Role", "session-agent", "agent-session", "session-1", upstreamRouterURL},
		{"a task job from a pod holding exactly the worker's rights, at its documented URL", "task-job", "task-worker", "job-1", taskWorkerRouterURL},
	}
	for _, tc := range allowed {
		t.Run(tc.name+", no token: 200", func(t *testing.T) {
			res, err := fromPod(t, ns, tc.pod, tc.flow, ns, tc.claim, tc.router)
			mustf(t, err, "%s from pod %s", tc.flow, tc.pod)
			t.Logf("router: %d %s", res.Code, strings.TrimSpace(res.Body))
			if res.Code != http.StatusOK || !strings.Contains(res.Body, "hello from "+tc.claim) {
				t.Errorf("router: %d %s, want 200 with the command's output", res.Code, res.Body)
			}
		})
	}

	refused := []struct {
		name, podNS, pod string
		wantCode         int
		wantBody         string
	}{
		{"a pod of the namespace without any of the rights", ns, "bystander", http.StatusForbidden,
			`(pod ` + ns + `/bystander) may not reach sandbox ` + ns + `/target: it holds none of`},
		{"a pod of another namespace with the agent server's Role there", other, "outsider", http.StatusForbidden,
			`:cognition\" (pod ` + other + `/outsider) may not reach sandbox ` + ns + `/target`},
		{"a host-network pod", hostNS, "on-the-node", http.StatusUnauthorized, "comes from no pod the router can name"},
	}
	for _, tc := range refused {
		t.Run(tc.name+": "+http.StatusText(tc.wantCode), func(t *testing.T) {
			res, err := fromPod(t, tc.podNS, tc.pod, "execute", ns, "target", upstreamRouterURL)
			mustf(t, err, "request from pod %s", tc.pod)
			t.Logf("router: %d %s", res.Code, strings.TrimSpace(res.Body))
			if res.Code != tc.wantCode || !strings.Contains(res.Body, tc.wantBody) {
				t.Errorf("router: %d %s, want %d naming %q", res.Code, res.Body, tc.wantCode, tc.wantBody)
			}
		})
	}

	t.Run("the node without a token: 401", func(t *testing.T) {
		res := fromNode(t, ns, "target")
		t.Logf("router: %d %s", res.Code, strings.TrimSpace(res.Body))
		if res.Code != http.StatusUnauthorized || !strings.Contains(res.Body, "send a bearer token") {
			t.Errorf("router: %d %s, want 401 asking for a bearer token", res.Code, res.Body)
		}
	})

	t.Run("a sandbox cannot take the IP of a pod with the rights", func(t *testing.T) {
		stolen := ip["session-agent"]
		var out, errOut bytes.Buffer
		err := kubeExec(t.Context(), ns, "impostor", "runtime", []string{"busybox", "ip", "addr", "add", stolen + "/32", "dev", "eth0"}, &out, &errOut)
		if err == nil || !strings.Contains(errOut.String(), "not permitted") {
			t.Fatalf("ip addr add %s in a sandbox: %v %q, want Operation not permitted", stolen, err, errOut.String())
		}
		t.Logf("ip addr add %s: %s", stolen, strings.TrimSpace(errOut.String()))
		res, err := fromPod(t, ns, "impostor", "execute", ns, "target", upstreamRouterURL, stolen)
		var ce *clientError
		if err == nil || !errors.As(err, &ce) || !strings.Contains(ce.stderr, "Cannot assign requested address") {
			t.Errorf("request from %s, the address of pod session-agent: %d %s %v; want the address refused to the sandbox", stolen, res.Code, res.Body, err)
		}
	})
}
