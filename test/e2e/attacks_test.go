//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The attack suite of docs/security.md: each attack is made with the credentials of a tenant
// (a ServiceAccount bound to agent-sandbox-user in its own namespace, never an admin), on the
// local cluster where NetworkPolicy is enforced, and asserts the safe outcome. The admin
// (kube) only plays the namespace admin: templates, pools, namespace labels.

// tenant is an identity bound to the agent-sandbox-user ClusterRole in its namespace, plus
// extra rules when a test needs a tenant with more (pods patch).
func tenant(t *testing.T, ns string, extra ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	return clientAs(t, tenantConfig(t, ns, extra...))
}

// tenantConfig is the tenant identity's REST config (for an SDK client of its own).
func tenantConfig(t *testing.T, ns string, extra ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	cfg := asServiceAccount(t, ns, "tenant", extra, nil)
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-agent-sandbox-user"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agent-sandbox-user"}}
	mustf(t, kube.Create(t.Context(), binding), "binding agent-sandbox-user in %s", ns)
	return cfg
}

// refusedWith checks that err is the API server refusing a write with a message naming want.
func refusedWith(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want it refused at admission naming %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: refused with %q, want a message naming %q", what, err, w)
		}
	}
}

// routerGet sends GET / to a sandbox's port through the router with the developer's token,
// which may reach every sandbox: what is refused is refused for the port.
func routerGet(ctx context.Context, ns, sandbox, port string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cluster.RouterURL+"/", nil)
	req.Header.Set("X-Sandbox-ID", sandbox)
	req.Header.Set("X-Sandbox-Namespace", ns)
	req.Header.Set("X-Sandbox-Port", port)
	req.Header.Set("Authorization", "Bearer "+cluster.RouterToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runtimeSandbox is a raw Sandbox running sandboxd (the legacy :8888 API answers /execute).
func runtimeSandbox(ns, name string) *agentsv1alpha1.Sandbox {
	return testwrap.MakeSandbox(ns, name).Containers(runtimeContainer()).TerminationGracePeriod(1).Obj()
}

func TestAttacksByTenants(t *testing.T) {
	testHost(t, "atk", "203.0.113.1", "203.0.113.10", 80, 53)
	nsA, nsB := newNamespace(t, "tenant-a"), newNamespace(t, "tenant-b")
	ctx := t.Context()
	a := tenant(t, nsA, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
	b := tenant(t, nsB)

	// The namespace admin's template and pool in tenant-a.
	createTemplate(t, nsA, "secure", false)
	mustf(t, a.Create(ctx, testwrap.MakeClaim(nsA, "claimed").Template("secure").Obj()), "tenant a: creating a claim")
	mustf(t, a.Create(ctx, harnessSandbox(nsA, "attacker", nil).Obj()), "tenant a: creating a raw sandbox")
	mustf(t, b.Create(ctx, runtimeSandbox(nsB, "victim")), "tenant b: creating a raw sandbox")
	mustf(t, b.Create(ctx, harnessSandbox(nsB, "neighbour", nil).Obj()), "tenant b: creating another raw sandbox")
	ip := podIPs(t, nsB, "victim", "neighbour")
	podIPs(t, nsA, "attacker", "claimed")
	pool := createPool(t, nsA, "pool", "secure", 1)

	t.Run("cross-tenant code execution: another namespace's raw sandbox is closed", func(t *testing.T) {
		expectReach(t, nsA, "attacker", "tenant b's sandboxd", ip["victim"], 8888, false)
		expectReach(t, nsB, "neighbour", "its own namespace's sandboxd", ip["victim"], 8888, false)
		code, body, err := routerPost(ctx, nsB, "victim", "/execute", `{"command":"echo routed"}`)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "routed") {
			t.Errorf("router → victim: %d %s %v, want 200: the router still reaches it", code, body, err)
		}
	})

	t.Run("egress widening by annotation needs sandboxes/network", func(t *testing.T) {
		for _, name := range []string{"claimed", "attacker"} {
			sb := &agentsv1alpha1.Sandbox{}
			mustf(t, a.Get(ctx, client.ObjectKey{Namespace: nsA, Name: name}, sb), "reading %s", name)
			patch := client.MergeFrom(sb.DeepCopy())
			// Added beside the Sandbox's own annotations: replacing them would also remove the
			// controller's template-ref annotation, which another policy refuses.
			metav1.SetMetaDataAnnotation(&sb.ObjectMeta, agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressRestricted)
			metav1.SetMetaDataAnnotation(&sb.ObjectMeta, agentsv1alpha1.EgressCIDRsAnnotation, "169.254.169.254/32,10.96.0.10/32")
			refusedWith(t, "tenant annotating "+name+" restricted", a.Patch(ctx, sb, patch), "sandboxes/network")
		}
		refusedWith(t, "tenant creating a raw sandbox with its own egress mode",
			a.Create(ctx, harnessSandbox(nsA, "widened", nil).Annotation(agentsv1alpha1.EgressAnnotation, "allow-all").Obj()), "sandboxes/network")
		refusedWith(t, "tenant opting its sandbox out of its NetworkPolicy",
			a.Create(ctx, harnessSandbox(nsA, "unmanaged", nil).Annotation(agentsv1alpha1.NetworkPolicyManagementAnnotation, "Unmanaged").Obj()),
			"sandboxes/network")
		expectReach(t, nsA, "claimed", "cluster DNS (the template blocks private ranges)", clusterDNS, 53, false)
	})

	t.Run("an admin's egress annotation on a claim's sandbox is ignored unless the template allows", func(t *testing.T) {
		sb := &agentsv1alpha1.Sandbox{}
		mustf(t, kube.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "claimed"}, sb), "reading claimed")
		patch := client.MergeFrom(sb.DeepCopy())
		metav1.SetMetaDataAnnotation(&sb.ObjectMeta, agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressAllowAll)
		mustf(t, kube.Patch(ctx, sb, patch), "admin annotating claimed allow-all")
		slow.EventuallyContext(t, "EgressPolicy=False/EgressIgnored", func(ctx context.Context) error {
			if err := kube.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
				return err
			}
			c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionEgressPolicy)
			if c == nil || c.Reason != agentsv1alpha1.ReasonEgressIgnored {
				return fmt.Errorf("EgressPolicy condition %+v", c)
			}
			return nil
		})
		expectReach(t, nsA, "claimed", "cluster DNS", clusterDNS, 53, false)
	})

	t.Run("restricted mode opens DNS to the cluster DNS only, never link-local", func(t *testing.T) {
		ns := newNamespace(t, "restricted")
		mustf(t, kube.Create(ctx, harnessSandbox(ns, "dns-only", nil).Annotation(agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressRestricted).Obj()),
			"admin creating a restricted sandbox")
		podIPs(t, ns, "dns-only")
		expectReach(t, ns, "dns-only", "cluster DNS", clusterDNS, 53, true)
		expectReach(t, ns, "dns-only", "port 53 of an outside host", "203.0.113.10", 53, false)
		metadata := harnessSandbox(ns, "metadata", nil).Annotation(agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressRestricted).
			Annotation(agentsv1alpha1.EgressCIDRsAnnotation, "169.254.169.254").Obj()
		mustf(t, kube.Create(ctx, metadata), "admin creating a sandbox asking for the metadata server")
		slow.EventuallyContext(t, "Ready=False/InvalidEgress naming link-local", func(ctx context.Context) error {
			if err := kube.Get(ctx, client.ObjectKeyFromObject(metadata), metadata); err != nil {
				return err
			}
			c := meta.FindStatusCondition(metadata.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
			if c == nil || c.Reason != agentsv1alpha1.ReasonInvalidEgress || !strings.Contains(c.Message, "link-local") {
				return fmt.Errorf("Ready condition %+v", c)
			}
			return nil
		})
		if _, err := podOf(ctx, ns, "metadata"); err == nil {
			t.Error("a pod was created for a sandbox asking for the metadata server")
		}
	})

	t.Run("host-level pod specs are refused in a namespace not opted in", func(t *testing.T) {
		cases := map[string]func(*corev1.PodSpec){
			"hostNetwork": func(s *corev1.PodSpec) { s.HostNetwork = true },
			"hostPID":     func(s *corev1.PodSpec) { s.HostPID = true },
			"privileged": func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			},
			"added capabilities": func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
			},
			"hostPath volume": func(s *corev1.PodSpec) {
				s.Volumes = append(s.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			},
		}
		for what, mutate := range cases {
			sb := harnessSandbox(nsA, "host-"+strings.ReplaceAll(strings.ToLower(what), " ", "-"), nil).Obj()
			mutate(&sb.Spec.PodTemplate.Spec)
			refusedWith(t, "tenant creating a sandbox with "+what, a.Create(ctx, sb), "agents.x-k8s.io/host-access")
		}
	})

	t.Run("the router refuses ports a sandbox does not declare and host-network sandboxes", func(t *testing.T) {
		for _, port := range []string{"10250", "36443", "22"} {
			if code, body := routerGet(ctx, nsB, "victim", port); code != http.StatusForbidden {
				t.Errorf("router → victim port %s: %d %s, want 403", port, code, body)
			}
		}
		hostNS := newNamespace(t, "host-ok")
		nsObj := &corev1.Namespace{}
		mustf(t, kube.Get(ctx, client.ObjectKey{Name: hostNS}, nsObj), "reading namespace")
		metav1.SetMetaDataLabel(&nsObj.ObjectMeta, "agents.x-k8s.io/host-access", "allowed")
		mustf(t, kube.Update(ctx, nsObj), "admin opting %s in to host access", hostNS)
		host := harnessSandbox(hostNS, "on-the-node", nil).Obj()
		host.Spec.PodTemplate.Spec.HostNetwork = true
		host.Spec.PodTemplate.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 10250}}
		slow.EventuallyContext(t, "a host-network sandbox in the opted-in namespace", func(ctx context.Context) error {
			return client.IgnoreAlreadyExists(kube.Create(ctx, host.DeepCopy()))
		})
		waitPodReady(t, hostNS, "on-the-node")
		for _, port := range []string{"10250", "36443"} {
			if code, body := routerGet(ctx, hostNS, "on-the-node", port); code != http.StatusForbidden {
				t.Errorf("router → host-network sandbox port %s: %d %s, want 403", port, code, body)
			}
		}
	})

	t.Run("ownership and the controller's labels cannot be forged", func(t *testing.T) {
		forged := harnessSandbox(nsA, "forged-member", nil).Obj()
		forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: extv1alpha1.GroupVersion.String(), Kind: "SandboxWarmPool",
			Name: pool.Name, UID: pool.UID, Controller: ptr.To(true)}}
		refusedWith(t, "tenant creating a sandbox owned by the pool", a.Create(ctx, forged), "sandboxes/ownership")
		labelled := harnessSandbox(nsA, "forged-label", nil).Label(extv1alpha1.WarmPoolLabel, "x").Obj()
		refusedWith(t, "tenant creating a sandbox with the pool label", a.Create(ctx, labelled), "sandboxes/ownership")
		routerLabelled := harnessSandbox(nsA, "router-look", nil).PodLabel(extv1alpha1.TemplateRefHashLabel, "x").Obj()
		refusedWith(t, "tenant giving a sandbox pod the template label", a.Create(ctx, routerLabelled), "sandboxes/ownership")

		claimed := &agentsv1alpha1.Sandbox{}
		mustf(t, a.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "claimed"}, claimed), "reading claimed")
		patch := client.MergeFrom(claimed.DeepCopy())
		delete(claimed.Spec.PodTemplate.Metadata.Labels, extv1alpha1.TemplateRefHashLabel)
		refusedWith(t, "tenant taking its claim's pod out of the template's policy", a.Patch(ctx, claimed, patch), "sandboxes/ownership")
	})

	t.Run("an unclaimed warm pool member is not routable", func(t *testing.T) {
		var member string
		slow.EventuallyContext(t, "a ready member the pool itself controls", func(ctx context.Context) error {
			var list agentsv1alpha1.SandboxList
			if err := kube.List(ctx, &list, client.InNamespace(nsA)); err != nil {
				return err
			}
			for _, sb := range list.Items {
				if metav1.IsControlledBy(&sb, pool) && sandboxReady(&sb) {
					member = sb.Name
					return nil
				}
			}
			return fmt.Errorf("no ready member of pool %s", pool.Name)
		})
		code, body, err := routerPost(ctx, nsA, member, "/execute", `{"command":"echo tampered"}`)
		t.Logf("router → unclaimed member %s: %d %s", member, code, body)
		if err != nil || code != http.StatusNotFound || strings.Contains(body, "tampered") || !strings.Contains(body, "unclaimed warm pool member") {
			t.Errorf("router → unclaimed member %s: %d %s %v, want 404 naming an unclaimed warm pool member", member, code, body, err)
		}
	})

	t.Run("a label patched onto a sandbox pod is taken back", func(t *testing.T) {
		pod := &corev1.Pod{}
		mustf(t, a.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "attacker"}, pod), "reading pod")
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Labels["app"] = "sandbox-router"
		mustf(t, a.Patch(ctx, pod, patch), "tenant labelling its pod as the router")
		slow.EventuallyContext(t, "the router's label removed", func(ctx context.Context) error {
			if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Labels["app"] == "sandbox-router" {
				return fmt.Errorf("pod labels %v", pod.Labels)
			}
			return nil
		})
	})
}
