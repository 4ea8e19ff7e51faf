package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The install paths a user takes — `kubectl apply -k config/default` and the Helm chart — are
// checked against the real API server: every object they render passes a server-side dry-run,
// their pods pass the restricted Pod Security level, and the samples validate against the CRDs.

const repoRoot = "../.."

// tool is a binary of the pinned Kubernetes tool cache (kubectl, helm).
func tool(t *testing.T, name string) string {
	t.Helper()
	p := env.Binary(name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing from KUBEBUILDER_ASSETS: run `hack/build-k8s.sh kubectl helm` (make test does): %v", name, err)
	}
	return p
}

func runTool(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(tool(t, name), args...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runTool(t, "kubectl", "kustomize", dir)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, out)
}

func helmTemplate(t *testing.T, ns string, set ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	args := []string{"template", "agent-sandbox", "charts/agent-sandbox", "--namespace", ns, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runTool(t, "helm", args...)
	if err != nil {
		return nil, err
	}
	return decodeObjects(t, out), nil
}

func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	return n
}

// restrictedNamespace creates ns enforcing the restricted Pod Security level, as
// config/manager/namespace.yaml does, and deletes it afterwards.
func restrictedNamespace(t *testing.T, ns string) {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// systemNamespace creates ns with config/manager/namespace.yaml's Pod Security labels: enforce
// privileged, for the router's check-network init container (NET_RAW), restricted audited and
// warned; it is deleted afterwards.
func systemNamespace(t *testing.T, ns string) {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
		"pod-security.kubernetes.io/audit":   "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// wantNetworkCheck checks whether the router Deployment in ns starts with the check-network
// init container, and that the container holds NET_RAW and nothing more.
func wantNetworkCheck(t *testing.T, objs []*unstructured.Unstructured, ns string, want bool) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "sandbox-router" || o.GetNamespace() != ns {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		inits := d.Spec.Template.Spec.InitContainers
		if got := len(inits) == 1 && inits[0].Name == "check-network"; got != want {
			t.Fatalf("router in %s has the check-network init container: %v, want %v (%v)", ns, got, want, inits)
		}
		if !want {
			return
		}
		sc := inits[0].SecurityContext
		if sc == nil || sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Add) != "[NET_RAW]" || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || fmt.Sprint(inits[0].Args) != "[check-network]" {
			t.Errorf("check-network: args %v, securityContext %+v; want [check-network], NET_RAW added, ALL dropped, no escalation", inits[0].Args, sc)
		}
		return
	}
	t.Fatalf("no router Deployment in %s", ns)
}

// dryRunApply server-side applies every object without persisting it (service accounts are
// persisted: pods name them, and admission looks them up). Namespaces are created beforehand.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		if o.GetKind() == "CustomResourceDefinition" {
			dryRunReplace(t, o)
			continue
		}
		opts := []client.PatchOption{client.FieldOwner("install-test"), client.ForceOwnership}
		if o.GetKind() != "ServiceAccount" {
			opts = append(opts, client.DryRunAll)
		}
		if err := k8s.Patch(ctx, o, client.Apply, opts...); err != nil { //nolint:staticcheck // unstructured apply
			t.Errorf("the API server refused %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// dryRunPods creates (dry run) one pod from each Deployment's template, so that Pod Security
// admission and the ServiceAccount admission check them as the ReplicaSet's pods would be.
func dryRunPods(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatalf("Deployment %s: %v", o.GetName(), err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-pod", Labels: d.Spec.Template.Labels},
			Spec:       d.Spec.Template.Spec,
		}
		if err := k8s.Create(context.Background(), pod, client.DryRunAll); err != nil {
			t.Errorf("a pod of Deployment %s is refused: %v", d.Name, err)
		}
	}
}

func TestInstallManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ns     string
		render func(t *testing.T, ns string) []*unstructured.Unstructured
		extra  map[string]int // objects beyond the base install
	}{
		{"kustomize config/default", "agent-sandbox-system", func(t *testing.T, _ string) []*unstructured.Unstructured {
			return kustomize(t, "config/default")
		}, nil},
		{"helm chart with default values", "it-helm-defaults", func(t *testing.T, ns string) []*unstructured.Unstructured {
			objs, err := helmTemplate(t, ns)
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}, nil},
		{"helm chart with a shared router token, one namespace routed", "it-helm-token", func(t *testing.T, ns string) []*unstructured.Unstructured {
			objs, err := helmTemplate(t, ns, "router.auth.mode=token", "router.auth.tokenSecret=router-token",
				"router.auth.identifyPods=false", "router.watchNamespace=agents", "controller.replicas=2")
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}, nil},
		{"helm chart with the node agent of the memory-keeping pause", "it-helm-node-agent", func(t *testing.T, ns string) []*unstructured.Unstructured {
			objs, err := helmTemplate(t, ns, "nodeAgent.enabled=true")
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}, map[string]int{"DaemonSet": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1}},
		{"helm chart with a router in a tenant namespace", "it-helm-tenant-router", func(t *testing.T, ns string) []*unstructured.Unstructured {
			tenant := ns + "-tenant"
			restrictedNamespace(t, tenant)
			// A tenant namespace enforcing restricted forbids the check's NET_RAW: its router
			// goes without (the system router checks the same network).
			objs, err := helmTemplate(t, ns, "router.tenantNamespaces={"+tenant+"}", "router.auth.mode=tokenreview", "router.auth.checkNetwork=false")
			if err != nil {
				t.Fatal(err)
			}
			wantNetworkCheck(t, objs, tenant, false)
			wantRouterService(t, objs, tenant, "sandbox-router-svc")
			wantRouterArgs(t, objs, tenant, "--auth-mode=tokenreview", "--authorize=true", "--identify-pods=true",
				"--identify-pods-exclude-namespaces=kube-system,kube-public,kube-node-lease")
			return objs
		}, map[string]int{"Deployment": 1, "ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "ClusterRoleBinding": 1, "Service": 1, "PodDisruptionBudget": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			systemNamespace(t, tc.ns)
			objs := tc.render(t, tc.ns)
			want := map[string]int{"CustomResourceDefinition": 4, "Deployment": 2, "ServiceAccount": 2, "ClusterRole": 7, "ClusterRoleBinding": 2, "Service": 4,
				"Secret": 1, "Role": 1, "RoleBinding": 1, // the conversion webhook's Service, certificate Secret and its Role
				"ValidatingAdmissionPolicy": 10, "ValidatingAdmissionPolicyBinding": 10,
				"PodDisruptionBudget": 2} // controller and router run two replicas each, one kept through drains
			for k, n := range tc.extra {
				want[k] += n
			}
			got := kinds(objs)
			for k, n := range want {
				if got[k] != n {
					t.Errorf("rendered %d %s, want %d (all: %v)", got[k], k, n, got)
				}
			}
			wantRouterService(t, objs, tc.ns, "sandbox-router-svc", "agent-sandbox-router")
			identifies := tc.name != "helm chart with a shared router token, one namespace routed"
			if identifies {
				wantRouterArgs(t, objs, tc.ns, "--auth-mode=tokenreview", "--authorize=true", "--identify-pods=true",
					"--identify-pods-exclude-namespaces=kube-system,kube-public,kube-node-lease")
			}
			wantNetworkCheck(t, objs, tc.ns, identifies && tc.name != "helm chart with a router in a tenant namespace")
			dryRunApply(t, objs)
			dryRunPods(t, objs)
		})
	}
}

// wantRouterService checks that the router is reachable where the integrators' clients look
// for it: upstream's sandbox-router-svc, and the task workers' agent-sandbox-router, port 8080 first,
// selecting the router pods (app=sandbox-router).
func wantRouterService(t *testing.T, objs []*unstructured.Unstructured, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		found := false
		for _, o := range objs {
			if o.GetKind() != "Service" || o.GetName() != name || o.GetNamespace() != ns {
				continue
			}
			found = true
			var svc corev1.Service
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &svc); err != nil {
				t.Fatal(err)
			}
			if svc.Spec.Selector["app"] != "sandbox-router" || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Port != 8080 {
				t.Errorf("Service %s: selector %v, ports %v; want app=sandbox-router and 8080 first", name, svc.Spec.Selector, svc.Spec.Ports)
			}
		}
		if !found {
			t.Errorf("no Service %s in namespace %s", name, ns)
		}
	}
}

// wantRouterArgs checks that the router Deployment in ns runs with every argument (or argument
// prefix) in want: authorization is on in every install.
func wantRouterArgs(t *testing.T, objs []*unstructured.Unstructured, ns string, want ...string) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != "sandbox-router" || o.GetNamespace() != ns {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, w := range want {
			if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, w) }) {
				t.Errorf("router in %s runs with %v, want %s", ns, args, w)
			}
		}
		if slices.Contains(args, "--auth-mode=none") {
			t.Errorf("router in %s runs without authentication: %v", ns, args)
		}
		return
	}
	t.Errorf("no Deployment sandbox-router in namespace %s", ns)
}

func TestSamplesValidateAgainstTheCRDs(t *testing.T) {
	ns := newNamespace(t)
	objs := kustomize(t, "config/samples")
	if got := kinds(objs); !reflect.DeepEqual(got, map[string]int{"Sandbox": 1, "SandboxTemplate": 2, "SandboxWarmPool": 1, "SandboxClaim": 1}) {
		t.Fatalf("samples: %v, want one of each kind and two templates (secure default, direct access)", got)
	}
	for _, o := range objs {
		o.SetNamespace(ns)
	}
	dryRunApply(t, objs)
}

func TestHelmChart(t *testing.T) {
	t.Run("lints cleanly", func(t *testing.T) {
		if _, err := runTool(t, "helm", "lint", "--strict", "charts/agent-sandbox"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("refuses bad values with a message", func(t *testing.T) {
		for _, tc := range []struct {
			set  []string
			want string
		}{
			{[]string{"router.auth.mode=open"}, `router.auth.mode must be token or tokenreview, not "open"`},
			{[]string{"router.auth.mode=none"}, "router.auth.mode none is not installable"},
			{[]string{"router.auth.mode=token", "router.auth.tokenSecret=t"}, "router.auth.identifyPods needs router.auth.mode=tokenreview"},
			{[]string{"router.auth.allowAnonymous=true"}, "router.auth.allowAnonymous was removed"},
			{[]string{"controller.logLevel=debug"}, "controller.logLevel was replaced by controller.logVerbosity"},
			{[]string{"router.logLevel=debug"}, "router.logLevel was replaced by router.logVerbosity"},
			{[]string{"router.auth.mode=token", "router.auth.identifyPods=false"}, "router.auth.mode=token needs router.auth.tokenSecret"},
			{[]string{"router.e2b.enabled=true"}, "router.e2b.enabled needs router.auth.scopedTokenSecret"},
		} {
			_, err := helmTemplate(t, "x", tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %v: error %v, want one containing %q", tc.set, err, tc.want)
			}
		}
	})
	t.Run("grants the controller exactly the generated role", func(t *testing.T) {
		objs, err := helmTemplate(t, "x")
		if err != nil {
			t.Fatal(err)
		}
		generated := decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "config/rbac/role.yaml")))
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" && o.GetName() == "agent-sandbox-controller" {
				if !reflect.DeepEqual(o.Object["rules"], generated[0].Object["rules"]) {
					t.Fatalf("chart rules %v\nwant config/rbac/role.yaml's %v", o.Object["rules"], generated[0].Object["rules"])
				}
				return
			}
		}
		t.Fatal("no ClusterRole agent-sandbox-controller in the chart")
	})
	t.Run("installs a router into a tenant namespace", func(t *testing.T) {
		objs, err := helmTemplate(t, "x", "router.tenantNamespaces={team-a}")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			if o.GetNamespace() != "team-a" {
				continue
			}
			got = append(got, o.GetKind()+"/"+o.GetName())
			if o.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			args := d.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--namespace=team-a") || d.Spec.Template.Labels["app"] != "sandbox-router" {
				t.Errorf("tenant router args %v, labels %v; want --namespace=team-a and app=sandbox-router", args, d.Spec.Template.Labels)
			}
		}
		slices.Sort(got)
		want := []string{"Deployment/sandbox-router", "PodDisruptionBudget/sandbox-router", "Role/sandbox-router", "RoleBinding/sandbox-router", "Service/sandbox-router-svc", "ServiceAccount/sandbox-router"}
		if !slices.Equal(got, want) {
			t.Errorf("objects in team-a: %v, want %v (namespaced read of Sandboxes, no cluster-wide grant)", got, want)
		}
	})
	t.Run("leaves the router out when disabled", func(t *testing.T) {
		objs, err := helmTemplate(t, "x", "router.enabled=false")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if strings.Contains(o.GetName(), "router") {
				t.Errorf("rendered %s %s with the router disabled", o.GetKind(), o.GetName())
			}
		}
	})
}

// With router.e2b.enabled the router serves E2B's SDKs on a port of its own and of its Service.
func TestHelmChartServesE2BWhenAsked(t *testing.T) {
	objs, err := helmTemplate(t, "x", "router.e2b.enabled=true", "router.auth.scopedTokenSecret=router-scoped-token",
		"router.e2b.port=3100", "router.e2b.domain=sandboxes.example")
	if err != nil {
		t.Fatal(err)
	}
	wantRouterArgs(t, objs, "x", "--e2b-listen=:3100", "--e2b-domain=sandboxes.example", "--scoped-token-secret-file=")
	for _, o := range objs {
		if o.GetKind() != "Service" || o.GetName() != "sandbox-router-svc" {
			continue
		}
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &svc); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
			return p.Name == "e2b" && p.Port == 3100 && p.TargetPort.StrVal == "e2b"
		}) {
			t.Errorf("Service ports %v, want e2b 3100 -> e2b", svc.Spec.Ports)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
