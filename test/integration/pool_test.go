package integration

import (
	"context"
	"fmt"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func liveMembers(t *testing.T, ns string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, sb := range sandboxesIn(t, ns) {
		if owner := metav1.GetControllerOf(&sb); owner != nil && owner.Kind == "SandboxWarmPool" && sb.DeletionTimestamp.IsZero() {
			out[sb.Name] = true
		}
	}
	return out
}

func memberCount(t *testing.T, ns string, want int) func() error {
	return func() error {
		if got := len(liveMembers(t, ns)); got != want {
			return fmt.Errorf("%d members, want %d", got, want)
		}
		return nil
	}
}

func TestPoolKeepsFullSandboxesAndScalesThroughTheScaleSubresource(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	pool := testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(2).Obj()
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), pool)
	testwrap.Eventually(t, "2 ready members", poolReady(t, ns, "pool", 2))
	for _, sb := range sandboxesIn(t, ns) {
		if !metav1.IsControlledBy(&sb, pool) {
			t.Errorf("member %s owners = %v, want the pool", sb.Name, sb.OwnerReferences)
		}
	}

	scale := &autoscalingv1.Scale{}
	if err := k8s.SubResource("scale").Get(context.Background(), pool, scale); err != nil {
		t.Fatalf("reading the pool's scale: %v", err)
	}
	scale.Spec.Replicas = 4
	if err := k8s.SubResource("scale").Update(context.Background(), pool, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scaling the pool: %v", err)
	}
	testwrap.Eventually(t, "4 ready members after kubectl scale", poolReady(t, ns, "pool", 4))
	p := &extv1alpha1.SandboxWarmPool{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pool), p); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	sel, _ := metav1.ParseToLabelSelector(p.Status.Selector)
	ls, _ := metav1.LabelSelectorAsSelector(sel)
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: ls}); err != nil || len(pods.Items) != 4 {
		t.Errorf("status.selector %q finds %d pods (err %v), want the 4 members' pods", p.Status.Selector, len(pods.Items), err)
	}
}

func TestPoolScaleDownRemovesNotReadyMembersFirst(t *testing.T) {
	ns := newNamespace(t)
	pool := testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(3).Obj()
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), pool)
	testwrap.Eventually(t, "3 members", memberCount(t, ns, 3))
	var readyOne string
	for name := range liveMembers(t, ns) {
		readyOne = name
		break
	}
	setPodStatus(t, waitForPod(t, ns, readyOne), running("10.9.9.9"))
	testwrap.Eventually(t, "one ready member", func() error {
		p := &extv1alpha1.SandboxWarmPool{}
		_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(pool), p)
		if p.Status.ReadyReplicas != 1 {
			return fmt.Errorf("readyReplicas %d", p.Status.ReadyReplicas)
		}
		return nil
	})
	patchPoolReplicas(t, pool, 1)
	testwrap.Eventually(t, "1 member left", memberCount(t, ns, 1))
	if left := liveMembers(t, ns); !left[readyOne] {
		t.Errorf("scale down kept %v, want the ready member %s", left, readyOne)
	}
}

func TestPoolUpdateStrategies(t *testing.T) {
	cases := []struct {
		strategy     extv1alpha1.SandboxWarmPoolUpdateStrategyType
		wantOldAfter bool
	}{
		{extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType, false},
		{extv1alpha1.OnReplenishSandboxWarmPoolUpdateStrategyType, true},
	}
	for _, tc := range cases {
		t.Run(string(tc.strategy), func(t *testing.T) {
			ns := newNamespace(t)
			startFakeKubelet(t, ns)
			tmpl := testwrap.MakeTemplate(ns, "tpl").Obj()
			pool := testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(2).UpdateStrategy(tc.strategy).Obj()
			mustCreateObj(t, tmpl, pool)
			testwrap.Eventually(t, "2 ready", poolReady(t, ns, "pool", 2))
			old := liveMembers(t, ns)

			editTemplateImage(t, tmpl, "sandbox-runtime:v2")
			// Scaling up forces a reconcile after the edit; the new member is built from v2.
			patchPoolReplicas(t, pool, 3)
			testwrap.Eventually(t, "3 ready after the edit", poolReady(t, ns, "pool", 3))
			now := liveMembers(t, ns)
			kept := 0
			for name := range old {
				if now[name] {
					kept++
				}
			}
			if tc.wantOldAfter && kept != 2 {
				t.Errorf("OnReplenish replaced stale members: kept %d of 2", kept)
			}
			if !tc.wantOldAfter && kept != 0 {
				t.Errorf("Recreate kept %d stale members, want 0", kept)
			}
			for _, sb := range sandboxesIn(t, ns) {
				if now[sb.Name] && !old[sb.Name] && sb.Spec.PodTemplate.Spec.Containers[0].Image != "sandbox-runtime:v2" {
					t.Errorf("new member %s built from the old template", sb.Name)
				}
			}
		})
	}
}

func TestDeletingAPoolKeepsClaimedSandboxes(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	pool := testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj()
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), pool)
	testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 1))
	mustCreateObj(t, testwrap.MakeClaim(ns, "keeper").Template("tpl").Obj())
	testwrap.Eventually(t, "claim Ready", claimReadyIs(t, ns, "keeper", metav1.ConditionTrue, ""))
	claimed := getClaim(t, ns, "keeper").Status.SandboxStatus.Name
	testwrap.Eventually(t, "pool refilled", poolReady(t, ns, "pool", 1))

	if err := k8s.Delete(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "unclaimed members garbage-collected", memberCount(t, ns, 0))
	if err := exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimed}}, true)(); err != nil {
		t.Errorf("claimed sandbox %s: %s", claimed, err)
	}
}

func patchPoolReplicas(t *testing.T, pool *extv1alpha1.SandboxWarmPool, n int32) {
	t.Helper()
	// The controller writes the pool's status meanwhile (a template edit makes it look again).
	edit(t, pool.DeepCopy(), func(p *extv1alpha1.SandboxWarmPool) { p.Spec.Replicas = n })
}

func editTemplateImage(t *testing.T, tmpl *extv1alpha1.SandboxTemplate, image string) {
	t.Helper()
	edit(t, tmpl.DeepCopy(), func(tp *extv1alpha1.SandboxTemplate) { tp.Spec.PodTemplate.Spec.Containers[0].Image = image })
}
