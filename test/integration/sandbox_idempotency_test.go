package integration

import (
	"context"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// writeCounter wraps a real client and counts every write it makes, status included.
type writeCounter struct{ n atomic.Int64 }

func (w *writeCounter) wrap(c client.WithWatch) client.WithWatch {
	count := func() { w.n.Add(1) }
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, o, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, o, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
			count()
			return c.SubResource(sub).Update(ctx, o, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			count()
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	})
}

// A reconcile of a sandbox whose children and status are already right writes nothing: the
// controller is level-triggered and status is written only when it changed.
func TestSandboxReconcileOfSteadyStateWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "steady").Volume(homeVolume(), "/home/agent").PodLabel("x", "y").Obj())
	setPodStatus(t, waitForPod(t, ns, "steady"), running("10.0.3.1"))
	testwrap.Eventually(t, "Ready=True", readyIs(t, ns, "steady", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))

	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	counter := &writeCounter{}
	wrapped := counter.wrap(direct)
	r := sandbox.New(wrapped, wrapped, sandbox.Options{})
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "steady"}}
	for i := 0; i < 2; i++ {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
	}
	if n := counter.n.Load(); n != 0 {
		t.Errorf("reconciling a sandbox in steady state made %d writes, want 0", n)
	}
}
