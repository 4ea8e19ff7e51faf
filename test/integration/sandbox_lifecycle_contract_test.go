package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// holdFinalizer keeps a pod in the API (deletionTimestamp set) until the test lets it go, the
// way a slow kubelet or a node agent would.
const holdFinalizer = "test.agents.x-k8s.io/hold"

func setFinalizers(t *testing.T, obj client.Object, finalizers ...string) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, obj.GetName(), err)
	}
	before := obj.DeepCopyObject().(client.Object)
	obj.SetFinalizers(finalizers)
	if err := k8s.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		t.Fatalf("setting finalizers on %T %s: %v", obj, obj.GetName(), err)
	}
}

// beingDeleted checks that obj still exists with a deletionTimestamp.
func beingDeleted(obj client.Object) func() error {
	return func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if obj.GetDeletionTimestamp() == nil {
			return fmt.Errorf("%T %s has no deletionTimestamp", obj, obj.GetName())
		}
		return nil
	}
}

// The contract: DeleteForeground "deletes the SandboxClaim when expired using foreground cascade
// deletion. The claim remains in the API (with a deletionTimestamp) until its underlying Sandbox
// and Pod are fully terminated". Delete removes the claim at once and lets the rest follow.
func TestClaimDeleteForegroundStaysVisibleUntilItsSandboxAndPodAreGone(t *testing.T) {
	cases := []struct {
		policy              extv1alpha1.ShutdownPolicy
		claimWaitsForThePod bool
	}{
		{extv1alpha1.ShutdownPolicyDeleteForeground, true},
		{extv1alpha1.ShutdownPolicyDelete, false},
	}
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj())
	for i, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			name := fmt.Sprintf("fg-%d", i)
			claim := testwrap.MakeClaim(ns, name).Template("tpl").WarmPool("none").
				ShutdownTime(time.Now().Add(3 * time.Second)).ShutdownPolicy(tc.policy).Obj()
			mustCreateObj(t, claim)
			pod := waitForPod(t, ns, name)
			setFinalizers(t, pod, holdFinalizer)
			t.Cleanup(func() { setFinalizersIfExists(pod) })

			testwrap.Eventually(t, "pod being deleted after shutdownTime", beingDeleted(pod))
			claimObj := &extv1alpha1.SandboxClaim{ObjectMeta: claim.ObjectMeta}
			if !tc.claimWaitsForThePod {
				testwrap.Eventually(t, "claim gone while its pod is still terminating", exists(claimObj, false))
				return
			}
			sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			testwrap.Eventually(t, "sandbox being deleted", beingDeleted(sb))
			testwrap.Consistently(t, "claim visible with a deletionTimestamp while its pod terminates", 2*time.Second, beingDeleted(claimObj))

			setFinalizers(t, pod)
			testwrap.Eventually(t, "claim gone once its pod and sandbox are", exists(claimObj, false))
			if err := exists(sb, false)(); err != nil {
				t.Errorf("claim disappeared before its sandbox: %s", err)
			}
			if err := exists(podOf(ns, name), false)(); err != nil {
				t.Errorf("claim disappeared before its pod: %s", err)
			}
		})
	}
}

func setFinalizersIfExists(pod *corev1.Pod) {
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || len(pod.Finalizers) == 0 {
		return
	}
	before := pod.DeepCopy()
	pod.Finalizers = nil
	_ = k8s.Patch(ctx, pod, client.MergeFrom(before))
}

// The contract: the claim's shutdownTime "is not propagated to the underlying Sandbox"; the claim
// controller enforces it. Whether the Sandbox was created cold or adopted warm.
func TestClaimShutdownTimeIsNotCopiedOntoTheSandbox(t *testing.T) {
	cases := []struct {
		name     string
		warmpool string
		launch   string
	}{
		{"cold start", "none", extv1alpha1.LaunchTypeCold},
		{"warm adoption", "default", extv1alpha1.LaunchTypeWarm},
	}
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj())
	testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 1))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("ttl-%d", i)
			claim := testwrap.MakeClaim(ns, name).Template("tpl").WarmPool(tc.warmpool).
				ShutdownTime(time.Now().Add(time.Hour)).ShutdownPolicy(extv1alpha1.ShutdownPolicyDelete).Obj()
			mustCreateObj(t, claim)
			testwrap.Eventually(t, "claim Ready", claimReadyIs(t, ns, name, metav1.ConditionTrue, ""))
			sb := getSandbox(t, ns, getClaim(t, ns, name).Status.SandboxStatus.Name)
			if got := sb.Labels[extv1alpha1.LaunchTypeLabel]; got != tc.launch {
				t.Fatalf("launch type %q, want %q (the case tests the wrong path)", got, tc.launch)
			}
			if sb.Spec.ShutdownTime != nil {
				t.Errorf("sandbox %s spec.shutdownTime = %v, want unset: the claim's lifecycle stays on the claim", sb.Name, sb.Spec.ShutdownTime)
			}
			if got := sb.EffectiveShutdownPolicy(); got != agentsv1alpha1.ShutdownPolicyRetain {
				t.Errorf("sandbox %s shutdownPolicy = %s, want the Sandbox default Retain, not the claim's Delete", sb.Name, got)
			}
		})
	}
}

// A paused Sandbox (replicas 0) still expires at its shutdownTime, per its shutdownPolicy.
func TestSandboxExpiresWhilePaused(t *testing.T) {
	cases := []struct {
		policy      agentsv1alpha1.ShutdownPolicy
		wantSandbox bool
	}{
		{agentsv1alpha1.ShutdownPolicyRetain, true},
		{agentsv1alpha1.ShutdownPolicyDelete, false},
	}
	ns := newNamespace(t)
	for i, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			name := fmt.Sprintf("paused-%d", i)
			sb := create(t, testwrap.MakeSandbox(ns, name).Volume(homeVolume(), "/home/agent").Replicas(0).
				ShutdownTime(time.Now().Add(3*time.Second)).ShutdownPolicy(tc.policy).Obj())
			testwrap.Eventually(t, "Ready=False/SandboxPaused before shutdownTime", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonPaused))

			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			testwrap.Eventually(t, "service deleted at shutdownTime", exists(svc, false))
			testwrap.Eventually(t, "sandbox presence", exists(&agentsv1alpha1.Sandbox{ObjectMeta: sb.ObjectMeta}, tc.wantSandbox))
			if !tc.wantSandbox {
				return
			}
			testwrap.Eventually(t, "Ready=False/SandboxExpired", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonExpired))
			testwrap.Eventually(t, "PVC kept (Retain)", exists(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-" + name}}, true))
			if err := exists(podOf(ns, name), false)(); err != nil {
				t.Errorf("an expired paused sandbox has a pod: %s", err)
			}
		})
	}
}

// The agent harness (docs/integrations.md) keeps a workspace Sandbox alive by moving its shutdownTime forward. A Retain Sandbox
// whose shutdownTime has passed comes back (pod, service, readiness) once the time is moved into
// the future again; with replicas 0 → 1 in the same patch, as the harness resumes.
func TestSandboxShutdownTimeRefreshedAfterExpiryBringsItBack(t *testing.T) {
	cases := []struct {
		name        string
		startPaused bool
	}{
		{"expired while running, refreshed", false},
		{"expired while paused, refreshed and resumed", true},
	}
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("refresh-%d", i)
			expiring := testwrap.MakeSandbox(ns, name).Volume(homeVolume(), "/home/agent").
				ShutdownTime(time.Now().Add(3 * time.Second)).ShutdownPolicy(agentsv1alpha1.ShutdownPolicyRetain)
			if tc.startPaused {
				expiring.Replicas(0)
			}
			mustCreateObj(t, expiring.Obj())
			testwrap.Eventually(t, "Ready=False/SandboxExpired", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonExpired))

			sb := getSandbox(t, ns, name)
			before := sb.DeepCopy()
			sb.Spec.ShutdownTime = &metav1.Time{Time: time.Now().Add(time.Hour)}
			one := int32(1)
			sb.Spec.Replicas = &one
			if err := k8s.Patch(context.Background(), sb, client.MergeFrom(before)); err != nil {
				t.Fatalf("refreshing shutdownTime: %v", err)
			}
			testwrap.Eventually(t, "Ready=True after the refresh", readyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
			st := getSandbox(t, ns, name).Status
			if len(st.PodIPs) == 0 || st.ServiceFQDN == "" {
				t.Errorf("status after refresh = %+v, want pod IPs and a service again", st)
			}
			testwrap.Eventually(t, "PVC still there", exists(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-" + name}}, true))
		})
	}
}
