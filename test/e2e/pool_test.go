//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// Claims adopt warm members; the pool replaces each adopted member with a new ready one.
func TestWarmPoolRefillsAfterClaims(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "pool")
	createTemplate(t, ns, "runtime", false)
	pool := createPool(t, ns, "runtime-pool", "runtime", 2)
	cli := sdkClient(t, ns)

	adopted := map[string]bool{}
	for i := 0; i < 2; i++ {
		sb, err := cli.Create(t.Context(), "runtime", sdk.WithWarmPool("runtime-pool"))
		mustf(t, err, "claim %d", i)
		adopted[sb.SandboxName()] = true
	}
	if len(adopted) != 2 {
		t.Fatalf("two claims adopted %v", adopted)
	}
	// The pool's status can still count the adopted members for a moment: look at the members.
	slow.EventuallyContext(t, "two new ready pool members", func(ctx context.Context) error {
		var members agentsv1alpha1.SandboxList
		if err := kube.List(ctx, &members, client.InNamespace(ns), client.HasLabels{extv1alpha1.WarmPoolLabel}); err != nil {
			return err
		}
		ready := 0
		for _, m := range members.Items {
			if adopted[m.Name] {
				return fmt.Errorf("adopted sandbox %s still labelled as a pool member", m.Name)
			}
			if sandboxReady(&m) {
				ready++
			}
		}
		if ready != 2 {
			return fmt.Errorf("%d ready pool members", ready)
		}
		return nil
	})
	waitPoolReady(t, pool)
}

// Deleting a claim removes everything made for it: Sandbox, Pod, Service and PVCs.
func TestDeletingClaimLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "cleanup")
	createTemplate(t, ns, "with-home", true)
	createPool(t, ns, "with-home-pool", "with-home", 1)
	cli := sdkClient(t, ns)

	for _, policy := range []string{"default", "none"} { // adopted warm member, and a cold one
		t.Run(policy, func(t *testing.T) {
			sb, err := cli.Create(t.Context(), "with-home", sdk.WithWarmPool(policy))
			mustf(t, err, "claiming")
			name := sb.SandboxName()
			objs := []client.Object{
				&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sandbox.PVCName("home", name)}},
			}
			for _, o := range objs {
				mustf(t, kube.Get(t.Context(), client.ObjectKeyFromObject(o), o), "%T %s before delete", o, o.GetName())
			}
			mustf(t, cli.Delete(t.Context(), sb.Name()), "deleting claim")
			for _, o := range objs {
				slow.EventuallyContext(t, "deletion of "+o.GetName(), func(ctx context.Context) error { return gone(ctx, o) })
			}
		})
	}
}
