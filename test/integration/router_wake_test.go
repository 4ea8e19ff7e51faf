package integration

import (
	"context"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The router wakes a paused Sandbox with the one write right its shipped ClusterRole gives it on
// Sandboxes (patch sandboxes/scale), as of the state it saw paused: a second router acting on
// the same state finds it changed and does nothing.
func TestTheRouterResumesAPausedSandboxWithItsScaleRightAlone(t *testing.T) {
	ns := newNamespace(t)
	for _, o := range decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "config/rbac/router_role.yaml"))) {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		if err := k8s.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
		bindRoles(t, ns, "sandbox-router", "ClusterRole/"+o.GetName())
	}
	waitForRight(t, ns, "sandbox-router", "patch", "scale", "paused")
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":sandbox-router",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	waker := &router.ScaleWaker{Client: dynamic.NewForConfigOrDie(cfg)}

	paused := create(t, testwrap.MakeSandbox(ns, "paused").Replicas(0).Obj())
	ctx := context.Background()
	resumed, err := waker.Resume(ctx, ns, "paused", paused.ResourceVersion)
	if err != nil || !resumed {
		t.Fatalf("the first resume: %v, %v; want the Sandbox resumed", resumed, err)
	}
	if got := getSandbox(t, ns, "paused").DesiredReplicas(); got != agentsv1alpha1.RunningReplicas {
		t.Fatalf("replicas after the resume: %d; want 1", got)
	}
	again, err := waker.Resume(ctx, ns, "paused", paused.ResourceVersion)
	if err != nil || again {
		t.Fatalf("a second router resuming the same paused state: %v, %v; want nothing done", again, err)
	}
	if err := waker.Client.Resource(agentsv1alpha1.GroupVersion.WithResource("sandboxes")).Namespace(ns).
		Delete(ctx, "paused", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the router deleting a Sandbox: %v; want Forbidden (its write right is the scale alone)", err)
	}
}
