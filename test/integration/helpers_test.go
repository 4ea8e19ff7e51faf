package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "it-" + rand.String(8)}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

func getSandbox(t *testing.T, ns, name string) *agentsv1alpha1.Sandbox {
	t.Helper()
	sb := &agentsv1alpha1.Sandbox{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, sb); err != nil {
		t.Fatalf("getting sandbox %s/%s: %v", ns, name, err)
	}
	return sb
}

// readyIs returns a check that the sandbox's Ready condition has the status and reason.
func readyIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		sb := getSandbox(t, ns, name)
		c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
		if c == nil {
			return errors.New("no Ready condition")
		}
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("Ready=%s/%s (%q), want %s/%s", c.Status, c.Reason, c.Message, status, reason)
		}
		if c.ObservedGeneration != sb.Generation {
			return fmt.Errorf("observedGeneration %d, want %d", c.ObservedGeneration, sb.Generation)
		}
		return nil
	}
}

// exists returns a check that obj exists (want=true) or is gone (want=false).
func exists(obj client.Object, want bool) func() error {
	return func() error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		switch {
		case err == nil && want, apierrors.IsNotFound(err) && !want:
			return nil
		case err == nil:
			return fmt.Errorf("%T %s still exists", obj, obj.GetName())
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%T %s does not exist", obj, obj.GetName())
		default:
			return err
		}
	}
}

func podOf(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// waitForPod waits for the sandbox's pod and returns it.
func waitForPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := podOf(ns, name)
	testwrap.Eventually(t, "pod "+name+" exists", exists(pod, true))
	return pod
}

// podState is what a kubelet would report, written through the pods/status subresource.
type podState struct {
	phase corev1.PodPhase
	ready bool
	ips   []string
	// unschedulable marks the pod as not schedulable by the scheduler.
	unschedulable bool
	reason        string
}

// edit reads obj afresh, applies change and writes it back, reading again when a controller's
// write (its status, a finalizer, a label) came in between: an Update carries the
// resourceVersion it read, so a write from a stale read is refused with a conflict.
func edit[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return k8s.Update(ctx, obj)
	})
	if err != nil {
		t.Fatalf("editing %T %s: %v", obj, obj.GetName(), err)
	}
}

// setPodStatus writes the status a kubelet would. The controller may write the pod's metadata
// between our read and our write (its labels), so a conflict is retried on a fresh read.
func setPodStatus(t *testing.T, pod *corev1.Pod, s podState) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		pod.Status = podStatus(s)
		return k8s.Status().Update(ctx, pod)
	})
	if err != nil {
		t.Fatalf("setting pod status: %v", err)
	}
}

func podStatus(s podState) corev1.PodStatus {
	now := metav1.Now()
	readyStatus := corev1.ConditionFalse
	if s.ready {
		readyStatus = corev1.ConditionTrue
	}
	st := corev1.PodStatus{Phase: s.phase, Reason: s.reason}
	if s.unschedulable {
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available", LastTransitionTime: now}}
	} else {
		st.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: now},
		}
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: "runtime", Ready: s.ready, Image: "sandbox-runtime:test"}}
	}
	for _, ip := range s.ips {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(s.ips) > 0 {
		st.PodIP = s.ips[0]
	}
	return st
}

func running(ips ...string) podState {
	return podState{phase: corev1.PodRunning, ready: true, ips: ips}
}

func containsAll(haystack string, needles ...string) bool {
	for _, n := range needles {
		if !strings.Contains(haystack, n) {
			return false
		}
	}
	return true
}

func mustCreateObj(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// create creates obj and returns it as the API server stored it.
func create[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	mustCreateObj(t, obj)
	return obj
}

// homeVolume is a 1Gi volume claim template "home" whose PVCs carry purpose=home.
func homeVolume() agentsv1alpha1.PersistentVolumeClaimTemplate {
	return testwrap.MakeVolumeClaim("home", "1Gi").Label("purpose", "home").Obj()
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
func claimReadyIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		c := &extv1alpha1.SandboxClaim{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, extv1alpha1.ClaimConditionReady)
		if cond == nil {
			return errors.New("no Ready condition")
		}
		if cond.Status != status || (reason != "" && cond.Reason != reason) {
			return fmt.Errorf("Ready=%s/%s (%q), want %s/%s", cond.Status, cond.Reason, cond.Message, status, reason)
		}
		if status == metav1.ConditionTrue && len(c.Status.SandboxStatus.PodIPs) == 0 {
			return errors.New("Ready but status.sandbox.podIPs is empty")
		}
		return nil
	}
}

// poolReady waits until the pool reports n ready members.
func poolReady(t *testing.T, ns, name string, n int32) func() error {
	return func() error {
		p := &extv1alpha1.SandboxWarmPool{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		if p.Status.ReadyReplicas != n || p.Status.Replicas != n {
			return fmt.Errorf("pool status replicas=%d ready=%d, want %d", p.Status.Replicas, p.Status.ReadyReplicas, n)
		}
		return nil
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
