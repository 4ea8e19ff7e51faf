package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// spec.autoscaling is the same in both versions: written in one, read in the other, with the API
// server's defaults; spec.replicas beside it is accepted (the autoscaler then owns it).
func TestPoolAutoscaleRoundTripsBothVersions(t *testing.T) {
	ns := newNamespace(t)
	t.Run("v1alpha1 written, v1beta1 read, defaults applied", func(t *testing.T) {
		mustCreateObj(t, testwrap.MakeWarmPool(ns, "alpha").Template("missing-template").Replicas(3).Autoscaling(1, 9).
			ScaleToZeroAfter(90*time.Second).Obj())
		got := &extv1beta1.SandboxWarmPool{}
		get(t, ns, "alpha", got)
		a := got.Spec.Autoscaling
		if a == nil || *a.MinReplicas != 1 || a.MaxReplicas != 9 || *a.HeadroomSeconds != 10 || a.Window.Duration != time.Minute ||
			a.ScaleDownStabilization.Duration != 5*time.Minute || a.ScaleToZeroAfter.Duration != 90*time.Second {
			t.Errorf("v1beta1 spec.autoscaling = %+v, want min 1, max 9, headroom 10, window 1m, stabilization 5m, scaleToZeroAfter 90s", a)
		}
	})
	t.Run("v1beta1 written, v1alpha1 read", func(t *testing.T) {
		mustCreateObj(t, testwrap.MakeWarmPool(ns, "beta").Template("missing-template").Autoscaling(0, 4).AutoscaleHeadroom(3).
			AutoscaleWindow(20*time.Second).ScaleDownStabilization(0).Hub())
		got := &extv1alpha1.SandboxWarmPool{}
		get(t, ns, "beta", got)
		a := got.Spec.Autoscaling
		if a == nil || *a.MinReplicas != 0 || a.MaxReplicas != 4 || *a.HeadroomSeconds != 3 || a.Window.Duration != 20*time.Second ||
			a.ScaleDownStabilization.Duration != 0 || a.ScaleToZeroAfter.Duration != 10*time.Minute {
			t.Errorf("v1alpha1 spec.autoscaling = %+v, want min 0, max 4, headroom 3, window 20s, stabilization 0, scaleToZeroAfter 10m", a)
		}
	})
}

// An autoscaled pool grows when claims come in and drops to minReplicas once none has come for
// scaleToZeroAfter, saying so in status.autoscaling.
func TestPoolAutoscaleGrowsWithClaimsAndShrinksToMinWhenIdle(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(),
		testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(0).Autoscaling(0, 6).AutoscaleHeadroom(3).
			AutoscaleWindow(3*time.Second).ScaleDownStabilization(0).ScaleToZeroAfter(3*time.Second).Obj())
	for i := range 4 {
		mustCreateObj(t, testwrap.MakeClaim(ns, fmt.Sprintf("c%d", i)).Template("tpl").Obj())
	}
	testwrap.Eventually(t, "the pool grown by the claims", poolAutoscaled(ns, "pool", func(p *extv1alpha1.SandboxWarmPool) error {
		a := p.Status.Autoscaling
		if p.Spec.Replicas < 1 || a == nil || a.LastClaimTime == nil || a.LastScaleTime == nil || a.ObservedClaimRate == nil {
			return fmt.Errorf("spec.replicas %d, status.autoscaling %+v: want grown, with a claim rate, last claim and last scale", p.Spec.Replicas, a)
		}
		return nil
	}))
	testwrap.Eventually(t, "the pool at minReplicas (0) with no claim for 3 s", poolAutoscaled(ns, "pool", func(p *extv1alpha1.SandboxWarmPool) error {
		a := p.Status.Autoscaling
		if p.Spec.Replicas != 0 || a == nil || a.Reason != extv1beta1.AutoscaleReasonIdle || a.DesiredReplicas != 0 || p.Status.Replicas != 0 {
			return fmt.Errorf("spec.replicas %d, status.replicas %d, status.autoscaling %+v: want 0, 0 and Idle", p.Spec.Replicas, p.Status.Replicas, a)
		}
		return nil
	}))
}

// poolAutoscaled reads the pool (v1alpha1) and checks it.
func poolAutoscaled(ns, name string, check func(*extv1alpha1.SandboxWarmPool) error) func() error {
	return func() error {
		p := &extv1alpha1.SandboxWarmPool{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		return check(p)
	}
}
