package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A sandbox pod wearing the router's labels would pass the secure-default NetworkPolicy's
// ingress rule of every other sandbox of the template (in a namespace where a router runs), so
// no path that tenants write may put them there.

func TestClaimPodMetadataPosingAsTheRouterIsRefusedAtAdmission(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name     string
		metadata string
		wantErr  string
	}{
		{"the router's label", "labels: {app: sandbox-router}",
			"additionalPodMetadata.labels: app=sandbox-router and app.kubernetes.io/name=sandbox-router identify the sandbox router"},
		{"the router's recommended label", "labels: {app.kubernetes.io/name: sandbox-router}",
			"additionalPodMetadata.labels: app=sandbox-router and app.kubernetes.io/name=sandbox-router identify the sandbox router"},
		{"a label in the controller's domain", "labels: {agents.x-k8s.io/sandbox-template-ref-hash: abc}",
			"additionalPodMetadata.labels: key agents.x-k8s.io/sandbox-template-ref-hash is in the reserved domain agents.x-k8s.io"},
		{"a label in a subdomain of the controller's", "labels: {extensions.agents.x-k8s.io/warm-pool: p}",
			"additionalPodMetadata.labels: key extensions.agents.x-k8s.io/warm-pool is in the reserved domain agents.x-k8s.io"},
		{"an annotation in the controller's domain", "annotations: {agents.x-k8s.io/propagated-labels: team}",
			"additionalPodMetadata.annotations: key agents.x-k8s.io/propagated-labels is in the reserved domain agents.x-k8s.io"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := createYAML(t, ns, claimYAML("sandboxTemplateRef: {name: t}\n  additionalPodMetadata: {"+c.metadata+"}"))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("create error = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
	t.Run("open keys are accepted", func(t *testing.T) {
		mustCreate(t, ns, claimYAML("sandboxTemplateRef: {name: t}\n  additionalPodMetadata: {"+
			"labels: {app: my-agent, app.kubernetes.io/name: my-agent, cognition.io/tenant: a, kueue.x-k8s.io/queue-name: q}, "+
			"annotations: {cluster-autoscaler.kubernetes.io/safe-to-evict: 'false', example.com/owner: me}}"))
	})
}

// Keys of the Kubernetes domains and invalid values do not let a pod pose as the router or pass
// this system's selectors, so, as upstream does, the claim is admitted and its Ready condition
// says what is wrong (InvalidMetadata); no Sandbox is made from it.
func TestClaimPodMetadataOutsideIsolationIsReportedInTheCondition(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "t").Obj())
	cases := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		wantMsg     string
	}{
		{"kubectl's default-container annotation", nil, map[string]string{"kubectl.kubernetes.io/default-container": "runtime"},
			`annotation key "kubectl.kubernetes.io/default-container" is in a reserved domain`},
		{"an annotation in k8s.io", nil, map[string]string{"k8s.io/anything": "x"}, `annotation key "k8s.io/anything" is in a reserved domain`},
		{"a label in a Kubernetes subdomain", map[string]string{"node.kubernetes.io/role": "x"}, nil, `label key "node.kubernetes.io/role" is in a reserved domain`},
		{"a label value over 63 characters", map[string]string{"owner": strings.Repeat("a", 64)}, nil, "label owner value"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("claim-%d", i)
			claim := testwrap.MakeClaim(ns, name).Template("t").PodLabels(c.labels).PodAnnotations(c.annotations).Obj()
			if err := k8s.Create(context.Background(), claim); err != nil {
				t.Fatalf("create: %v; only keys that matter to isolation are refused at admission", err)
			}
			testwrap.Eventually(t, "Ready=False/InvalidMetadata naming the problem", func() error {
				if err := claimReadyIs(t, ns, name, metav1.ConditionFalse, extv1alpha1.ReasonInvalidMetadata)(); err != nil {
					return err
				}
				if msg := readyMessage(getClaim(t, ns, name).Status.Conditions); !strings.Contains(msg, c.wantMsg) {
					return fmt.Errorf("Ready message %q, want it to contain %q", msg, c.wantMsg)
				}
				return nil
			})
			if err := exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, false)(); err != nil {
				t.Errorf("a Sandbox was made from a claim with invalid pod metadata: %v", err)
			}
		})
	}
}

func TestTemplateReservedPodMetadataIsLeftOutAndReported(t *testing.T) {
	ns := newNamespace(t)
	tmpl := testwrap.MakeTemplate(ns, "leaky").
		PodLabels(map[string]string{"app": "sandbox-router", "agents.x-k8s.io/claim-uid": "forged", "team": "a"}).
		PodAnnotations(map[string]string{"kubernetes.io/egress-bandwidth": "1G", "owner": "me"}).Obj()
	mustCreateObj(t, tmpl, testwrap.MakeClaim(ns, "c").Template("leaky").Obj())

	pod := waitForPod(t, ns, "c")
	if pod.Labels["app"] == "sandbox-router" || pod.Labels[extv1alpha1.ClaimUIDLabel] == "forged" {
		t.Errorf("pod labels = %v: the router's label or a forged controller label got through", pod.Labels)
	}
	if pod.Labels["team"] != "a" || pod.Annotations["owner"] != "me" {
		t.Errorf("pod metadata = %v / %v: the template's open keys must still be applied", pod.Labels, pod.Annotations)
	}
	if _, ok := pod.Annotations["kubernetes.io/egress-bandwidth"]; ok {
		t.Errorf("pod annotations = %v: a reserved annotation got through", pod.Annotations)
	}
	testwrap.Eventually(t, "a ReservedPodMetadata warning names every refused key", warningNames(ns, "SandboxTemplate", "leaky",
		extv1alpha1.EventReservedPodMetadata, "app=sandbox-router", "agents.x-k8s.io/claim-uid", "kubernetes.io/egress-bandwidth"))
}

func TestSandboxPodNeverCarriesTheRouterLabels(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "raw").PodLabels(map[string]string{"app": "sandbox-router", "team": "a"}).Obj())
	pod := waitForPod(t, ns, "raw")
	if pod.Labels["app"] == "sandbox-router" || pod.Labels["team"] != "a" {
		t.Fatalf("pod labels = %v, want team=a and no app=sandbox-router", pod.Labels)
	}
	testwrap.Eventually(t, "a RouterLabelsRefused warning on the Sandbox", warningNames(ns, "Sandbox", "raw",
		agentsv1alpha1.EventRouterLabelsRefused, "app=sandbox-router"))

	// A tenant allowed to patch Sandboxes (the agent server's Role grants patch, for shutdownTime) adds
	// the router's recommended label to a running sandbox's pod template.
	create(t, testwrap.MakeSandbox(ns, "patched").PodLabel("team", "b").Obj())
	waitForPod(t, ns, "patched")
	patch := []byte(`{"spec":{"podTemplate":{"metadata":{"labels":{"app.kubernetes.io/name":"sandbox-router","extra":"yes"}}}}}`)
	sb := &agentsv1alpha1.Sandbox{}
	sb.Namespace, sb.Name = ns, "patched"
	if err := k8s.Patch(context.Background(), sb, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "the pod takes the open label and refuses the router's", func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "patched"}, p); err != nil {
			return err
		}
		if p.Labels["extra"] != "yes" {
			return fmt.Errorf("pod labels %v, waiting for extra=yes", p.Labels)
		}
		if _, ok := p.Labels["app.kubernetes.io/name"]; ok {
			return fmt.Errorf("pod labels %v carry the router's label", p.Labels)
		}
		return nil
	})
}

// warningNames checks for a Warning event with reason on the object whose message names every
// one of names.
func warningNames(ns, kind, name, reason string, names ...string) func() error {
	return func() error {
		events := &corev1.EventList{}
		sel := fields.SelectorFromSet(fields.Set{"involvedObject.kind": kind, "involvedObject.name": name, "reason": reason})
		if err := k8s.List(context.Background(), events, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: sel}); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && containsAll(e.Message, names...) {
				return nil
			}
		}
		return fmt.Errorf("no %s Warning on %s %s naming %v yet (%d events)", reason, kind, name, names, len(events.Items))
	}
}
