package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The Python agent server's production NetworkPolicy (sandbox-deny-egress) selects pods labelled
// agents.x-k8s.io/sandbox=true. The controller puts that label on every sandbox pod, whichever
// way it was made, and nobody else sets or removes it.

// sandboxLabelled checks that the named pod carries agents.x-k8s.io/sandbox=true.
func sandboxLabelled(ns, pod string) func() error {
	return func() error {
		p := podOf(ns, pod)
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if got := p.Labels[agentsv1alpha1.SandboxPodLabel]; got != agentsv1alpha1.SandboxPodLabelValue {
			return fmt.Errorf("pod %s label %s = %q, want %q (labels %v)", pod, agentsv1alpha1.SandboxPodLabel, got,
				agentsv1alpha1.SandboxPodLabelValue, p.Labels)
		}
		return nil
	}
}

func TestEverySandboxPodCarriesTheSandboxLabel(t *testing.T) {
	cases := []struct {
		name string
		// make creates the objects and returns the name of the sandbox pod to check.
		make func(t *testing.T, ns string) string
	}{
		{"raw Sandbox", func(t *testing.T, ns string) string {
			create(t, testwrap.MakeSandbox(ns, "raw").PodLabel("team", "a").Obj())
			return "raw"
		}},
		{"raw Sandbox whose template says false (an admin's)", func(t *testing.T, ns string) string {
			create(t, testwrap.MakeSandbox(ns, "raw").PodLabel(agentsv1alpha1.SandboxPodLabel, "false").Obj())
			return "raw"
		}},
		{"claim from a template, cold", func(t *testing.T, ns string) string {
			mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeClaim(ns, "c").Template("tpl").WarmPool("none").Obj())
			return "c"
		}},
		{"template that sets it to false", func(t *testing.T, ns string) string {
			mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").PodLabel(agentsv1alpha1.SandboxPodLabel, "false").Obj(),
				testwrap.MakeClaim(ns, "c").Template("tpl").WarmPool("none").Obj())
			return "c"
		}},
		{"warm pool member", func(t *testing.T, ns string) string {
			mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj())
			testwrap.Eventually(t, "one member", memberCount(t, ns, 1))
			return onlyMember(t, ns)
		}},
		{"warm pool member adopted by a claim", func(t *testing.T, ns string) string {
			startFakeKubelet(t, ns)
			mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj())
			testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 1))
			member := onlyMember(t, ns)
			mustCreateObj(t, testwrap.MakeClaim(ns, "c").Template("tpl").Obj())
			testwrap.Eventually(t, "the claim adopts the member", func() error {
				if got := getClaim(t, ns, "c").Status.SandboxStatus.Name; got != member {
					return fmt.Errorf("claim's sandbox %q, want the member %s", got, member)
				}
				return nil
			})
			return member
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			pod := tc.make(t, ns)
			waitForPod(t, ns, pod)
			testwrap.Eventually(t, "the pod carries agents.x-k8s.io/sandbox=true", sandboxLabelled(ns, pod))
		})
	}
}

// The label is the controller's: taken off the pod, it comes back; a tenant cannot put it (or
// another value) on a Sandbox's pod template or a claim's pod metadata. Selectors stay as they
// were, so no Service or NetworkPolicy of ours depends on it.
func TestTheSandboxLabelIsTheControllersAlone(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "s").Obj())
	pod := waitForPod(t, ns, "s")
	testwrap.Eventually(t, "labelled", sandboxLabelled(ns, "s"))

	t.Run("removed from the pod, it comes back", func(t *testing.T) {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(pod.DeepCopy())
		delete(pod.Labels, agentsv1alpha1.SandboxPodLabel)
		if err := k8s.Patch(context.Background(), pod, patch); err != nil {
			t.Fatal(err)
		}
		testwrap.Eventually(t, "the label restored", sandboxLabelled(ns, "s"))
	})
	t.Run("selectors do not use it", func(t *testing.T) {
		svc := &corev1.Service{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "s"}, svc); err == nil {
			if _, ok := svc.Spec.Selector[agentsv1alpha1.SandboxPodLabel]; ok {
				t.Errorf("Service selector %v carries %s", svc.Spec.Selector, agentsv1alpha1.SandboxPodLabel)
			}
		}
		np := egressPolicyOf(ns, "s")
		testwrap.Eventually(t, "the Sandbox's NetworkPolicy", exists(np, true))
		if _, ok := np.Spec.PodSelector.MatchLabels[agentsv1alpha1.SandboxPodLabel]; ok {
			t.Errorf("NetworkPolicy podSelector %v carries %s", np.Spec.PodSelector, agentsv1alpha1.SandboxPodLabel)
		}
		if got := getSandbox(t, ns, "s").Status.LabelSelector; strings.Contains(got, agentsv1alpha1.SandboxPodLabel+"=") {
			t.Errorf("status.selector %q carries %s", got, agentsv1alpha1.SandboxPodLabel)
		}
	})
	t.Run("a claim cannot set it", func(t *testing.T) {
		_, err := createYAML(t, ns, claimYAML("sandboxTemplateRef: {name: t}\n  additionalPodMetadata: {labels: {agents.x-k8s.io/sandbox: 'false'}}"))
		if want := "key agents.x-k8s.io/sandbox is in the reserved domain agents.x-k8s.io"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("create error = %v, want one containing %q", err, want)
		}
	})
	t.Run("a tenant cannot set it on a Sandbox", func(t *testing.T) {
		shippedClientRole(t, "agent-sandbox-user")
		bindRoles(t, ns, "tenant", "ClusterRole/agent-sandbox-user")
		waitForRight(t, ns, "tenant", "create", "", "forged")
		forged := testwrap.MakeSandbox(ns, "forged").PodLabel(agentsv1alpha1.SandboxPodLabel, "false").Obj()
		err := actAs(t, ns, "tenant").Create(context.Background(), forged, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), agentsv1alpha1.SandboxPodLabel) {
			t.Errorf("tenant create with pod label %s=false: error %v, want a refusal naming the key", agentsv1alpha1.SandboxPodLabel, err)
		}
	})
}
