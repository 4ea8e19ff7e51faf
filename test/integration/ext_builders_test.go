package integration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

func aTemplate(ns, name string) *extv1alpha1.SandboxTemplate {
	return &extv1alpha1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extv1alpha1.SandboxTemplateSpec{PodTemplate: agentsv1alpha1.PodTemplate{
			Metadata: agentsv1alpha1.PodMetadata{Labels: map[string]string{"app": "agent"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "runtime", Image: "sandbox-runtime:test",
				Env:   []corev1.EnvVar{{Name: "PRESET", Value: "template"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 8888}},
			}}},
		}},
	}
}

func aPool(ns, name, template string, replicas int32) *extv1alpha1.SandboxWarmPool {
	return &extv1alpha1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       extv1alpha1.SandboxWarmPoolSpec{Replicas: replicas, TemplateRef: extv1alpha1.SandboxTemplateRef{Name: template}},
	}
}

func aClaim(ns, name, template string) *extv1alpha1.SandboxClaim {
	return &extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: template}},
	}
}

func withWarmPool(c *extv1alpha1.SandboxClaim, policy string) *extv1alpha1.SandboxClaim {
	c.Spec.WarmPool = ptr.To(extv1alpha1.WarmPoolPolicy(policy))
	return c
}

func mustCreateObj(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func getClaim(t *testing.T, ns, name string) *extv1alpha1.SandboxClaim {
	t.Helper()
	c := &extv1alpha1.SandboxClaim{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
		t.Fatalf("getting claim %s: %v", name, err)
	}
	return c
}

// claimReadyIs checks the claim's Ready condition; for True it also wants podIPs, the signal
// integrators poll.
func claimReadyIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) func() string {
	return func() string {
		c := &extv1alpha1.SandboxClaim{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
			return err.Error()
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, extv1alpha1.ClaimConditionReady)
		if cond == nil {
			return "no Ready condition"
		}
		if cond.Status != status || (reason != "" && cond.Reason != reason) {
			return fmt.Sprintf("Ready=%s/%s (%q), want %s/%s", cond.Status, cond.Reason, cond.Message, status, reason)
		}
		if status == metav1.ConditionTrue && len(c.Status.SandboxStatus.PodIPs) == 0 {
			return "Ready but status.sandbox.podIPs is empty"
		}
		return ""
	}
}

// poolReady waits until the pool reports n ready members.
func poolReady(t *testing.T, ns, name string, n int32) func() string {
	return func() string {
		p := &extv1alpha1.SandboxWarmPool{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err.Error()
		}
		if p.Status.ReadyReplicas != n || p.Status.Replicas != n {
			return fmt.Sprintf("pool status replicas=%d ready=%d, want %d", p.Status.Replicas, p.Status.ReadyReplicas, n)
		}
		return ""
	}
}

func sandboxesIn(t *testing.T, ns string) []agentsv1alpha1.Sandbox {
	t.Helper()
	list := &agentsv1alpha1.SandboxList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
