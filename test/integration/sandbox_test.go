package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestSandboxCreatesPodServiceAndPVC(t *testing.T) {
	ns := newNamespace(t)
	sb := create(t, testwrap.MakeSandbox(ns, "agent-1").Volume(homeVolume(), "/home/agent").
		PodLabel("team", "blue").PodAnnotation("note", "hello").Obj())

	pod := waitForPod(t, ns, "agent-1")
	if !metav1.IsControlledBy(pod, sb) {
		t.Errorf("pod owner references = %v, want controller reference to the sandbox", pod.OwnerReferences)
	}
	if pod.Labels["team"] != "blue" || pod.Labels[agentsv1alpha1.SandboxNameHashLabel] != agentsv1alpha1.NameHash("agent-1") {
		t.Errorf("pod labels = %v, want template label team=blue and the tracking label", pod.Labels)
	}
	if pod.Annotations["note"] != "hello" {
		t.Errorf("pod annotations = %v, want template annotation note=hello", pod.Annotations)
	}
	var claimName string
	for _, v := range pod.Spec.Volumes {
		if v.Name == "home" && v.PersistentVolumeClaim != nil {
			claimName = v.PersistentVolumeClaim.ClaimName
		}
	}
	if claimName != "home-agent-1" {
		t.Errorf("pod volume home claim = %q, want home-agent-1", claimName)
	}

	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-agent-1"}}
	testwrap.Eventually(t, "PVC home-agent-1 exists", exists(pvc, true))
	if !metav1.IsControlledBy(pvc, sb) || pvc.Labels["purpose"] != "home" {
		t.Errorf("PVC owners=%v labels=%v, want owned by the sandbox with the template's labels", pvc.OwnerReferences, pvc.Labels)
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-1"}}
	testwrap.Eventually(t, "service exists", exists(svc, true))
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service clusterIP = %q, want None (headless)", svc.Spec.ClusterIP)
	}
	if svc.Spec.Selector[agentsv1alpha1.SandboxNameHashLabel] != agentsv1alpha1.NameHash("agent-1") {
		t.Errorf("service selector = %v, want the tracking label", svc.Spec.Selector)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8888 {
		t.Errorf("service ports = %v, want the container port 8888", svc.Spec.Ports)
	}

	testwrap.Eventually(t, "Ready=False/PodPending before the kubelet reports", readyIs(t, ns, "agent-1", metav1.ConditionFalse, agentsv1alpha1.ReasonPodPending))
	setPodStatus(t, pod, running("10.1.2.3"))
	testwrap.Eventually(t, "Ready=True", readyIs(t, ns, "agent-1", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))

	got := getSandbox(t, ns, "agent-1").Status
	want := agentsv1alpha1.SandboxStatus{
		Service:       "agent-1",
		ServiceFQDN:   "agent-1." + ns + ".svc.cluster.local",
		Replicas:      1,
		LabelSelector: agentsv1alpha1.SandboxNameHashLabel + "=" + agentsv1alpha1.NameHash("agent-1"),
		PodIPs:        []string{"10.1.2.3"},
	}
	got.Conditions = nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("status = %+v, want %+v", got, want)
	}
}

func TestSandboxReadyReasonFollowsPodState(t *testing.T) {
	cases := []struct {
		name       string
		pod        podState
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"unschedulable", podState{phase: corev1.PodPending, unschedulable: true}, metav1.ConditionFalse, agentsv1alpha1.ReasonPodPending},
		{"running, not ready", podState{phase: corev1.PodRunning, ips: []string{"10.0.0.9"}}, metav1.ConditionFalse, agentsv1alpha1.ReasonPodNotReady},
		{"ready, no IP", podState{phase: corev1.PodRunning, ready: true}, metav1.ConditionFalse, agentsv1alpha1.ReasonPodNoIP},
		{"failed", podState{phase: corev1.PodFailed, reason: "Evicted"}, metav1.ConditionFalse, agentsv1alpha1.ReasonPodFailed},
		{"succeeded", podState{phase: corev1.PodSucceeded}, metav1.ConditionFalse, agentsv1alpha1.ReasonPodSucceeded},
		{"ready with IP", running("10.0.0.8"), metav1.ConditionTrue, agentsv1alpha1.ReasonReady},
	}
	ns := newNamespace(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("state-%d", i)
			create(t, testwrap.MakeSandbox(ns, name).Obj())
			setPodStatus(t, waitForPod(t, ns, name), tc.pod)
			testwrap.Eventually(t, "Ready reason", readyIs(t, ns, name, tc.wantStatus, tc.wantReason))
		})
	}
}

func TestSandboxFinishedConditionWhenPodCompletes(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "done").Obj())
	setPodStatus(t, waitForPod(t, ns, "done"), podState{phase: corev1.PodSucceeded})
	testwrap.Eventually(t, "Finished=True/PodSucceeded", func() error {
		c := meta.FindStatusCondition(getSandbox(t, ns, "done").Status.Conditions, agentsv1alpha1.SandboxConditionFinished)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != agentsv1alpha1.ReasonPodSucceeded {
			return fmt.Errorf("Finished condition = %+v", c)
		}
		return nil
	})
}

func TestSandboxPauseAndResumeKeepVolumesAndService(t *testing.T) {
	ns := newNamespace(t)
	sb := create(t, testwrap.MakeSandbox(ns, "persist").Volume(homeVolume(), "/home/agent").Obj())
	firstPod := waitForPod(t, ns, "persist")
	setPodStatus(t, firstPod, running("10.0.1.1"))
	testwrap.Eventually(t, "Ready=True", readyIs(t, ns, "persist", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))

	patchReplicas(t, sb, 0)
	testwrap.Eventually(t, "pod deleted on pause", exists(podOf(ns, "persist"), false))
	testwrap.Eventually(t, "Ready=False/SandboxPaused", readyIs(t, ns, "persist", metav1.ConditionFalse, agentsv1alpha1.ReasonPaused))
	// SandboxPaused is the reason from the moment the pod starts terminating; the counts follow
	// once it is gone.
	testwrap.Eventually(t, "paused status: replicas 0, no pod IPs, service kept", func() error {
		if paused := getSandbox(t, ns, "persist").Status; paused.Replicas != 0 || len(paused.PodIPs) != 0 || paused.Service != "persist" {
			return fmt.Errorf("paused status = %+v", paused)
		}
		return nil
	})
	testwrap.Eventually(t, "PVC kept while paused", exists(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-persist"}}, true))
	testwrap.Eventually(t, "service kept while paused", exists(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "persist"}}, true))

	patchReplicas(t, sb, 1)
	newPod := waitForPod(t, ns, "persist")
	if newPod.UID == firstPod.UID {
		t.Fatalf("resume kept the old pod %s, want a new one", newPod.UID)
	}
	if v := newPod.Spec.Volumes; len(v) != 1 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "home-persist" {
		t.Errorf("resumed pod volumes = %+v, want the same PVC home-persist", v)
	}
	setPodStatus(t, newPod, running("10.0.1.2"))
	testwrap.Eventually(t, "Ready=True after resume", readyIs(t, ns, "persist", metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
}

func TestSandboxScaleSubresourcePauses(t *testing.T) {
	ns := newNamespace(t)
	sb := create(t, testwrap.MakeSandbox(ns, "scaled").Obj())
	waitForPod(t, ns, "scaled")

	// What `kubectl scale sandbox scaled --replicas=0` does: read the scale, write it back, and
	// read again when a status write of the controller's came in between.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale := &autoscalingv1.Scale{}
		if err := k8s.SubResource("scale").Get(context.Background(), sb, scale); err != nil {
			return err
		}
		if scale.Spec.Replicas != 1 {
			t.Errorf("scale spec.replicas = %d, want the default 1", scale.Spec.Replicas)
		}
		scale.Spec.Replicas = 0
		return k8s.SubResource("scale").Update(context.Background(), sb, client.WithSubResourceBody(scale))
	})
	if err != nil {
		t.Fatalf("scaling to 0: %v", err)
	}
	testwrap.Eventually(t, "pod deleted", exists(podOf(ns, "scaled"), false))
	testwrap.Eventually(t, "scale reports 0 replicas and the selector", func() error {
		got := &autoscalingv1.Scale{}
		if err := k8s.SubResource("scale").Get(context.Background(), sb, got); err != nil {
			return err
		}
		if got.Status.Replicas != 0 || got.Status.Selector != sandbox.Selector("scaled") {
			return fmt.Errorf("scale status = %+v", got.Status)
		}
		return nil
	})
}

func TestSandboxExpiry(t *testing.T) {
	cases := []struct {
		name          string
		policy        agentsv1alpha1.ShutdownPolicy
		wantSandbox   bool
		wantPVCRemain bool
	}{
		{"Retain keeps the sandbox and its volumes", agentsv1alpha1.ShutdownPolicyRetain, true, true},
		{"Delete removes the sandbox and, through GC, its volumes", agentsv1alpha1.ShutdownPolicyDelete, false, false},
	}
	ns := newNamespace(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("expiring-%d", i)
			sb := create(t, testwrap.MakeSandbox(ns, name).Volume(homeVolume(), "/home/agent").
				ShutdownTime(time.Now().Add(3*time.Second)).ShutdownPolicy(tc.policy).Obj())
			setPodStatus(t, waitForPod(t, ns, name), running("10.0.2.1"))

			testwrap.Eventually(t, "pod deleted at shutdownTime", exists(podOf(ns, name), false))
			testwrap.Eventually(t, "service deleted at shutdownTime", exists(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, false))
			testwrap.Eventually(t, "sandbox presence", exists(&agentsv1alpha1.Sandbox{ObjectMeta: sb.ObjectMeta}, tc.wantSandbox))
			testwrap.Eventually(t, "PVC presence", exists(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-" + name}}, tc.wantPVCRemain))
			if tc.wantSandbox {
				testwrap.Eventually(t, "Ready=False/SandboxExpired", readyIs(t, ns, name, metav1.ConditionFalse, agentsv1alpha1.ReasonExpired))
				st := getSandbox(t, ns, name).Status
				if len(st.PodIPs) != 0 || st.Service != "" || st.ServiceFQDN != "" {
					t.Errorf("expired status = %+v, want no pod IPs and no service", st)
				}
			}
		})
	}
}

func TestSandboxAlreadyExpiredNeverStartsAPod(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "late").ShutdownTime(time.Now().Add(-time.Minute)).ShutdownPolicy(agentsv1alpha1.ShutdownPolicyRetain).Obj())
	testwrap.Eventually(t, "Ready=False/SandboxExpired", readyIs(t, ns, "late", metav1.ConditionFalse, agentsv1alpha1.ReasonExpired))
	if err := exists(podOf(ns, "late"), false)(); err != nil {
		t.Errorf("an expired sandbox got a pod: %s", err)
	}
}

func TestSandboxDeletionCascadesToChildren(t *testing.T) {
	ns := newNamespace(t)
	sb := create(t, testwrap.MakeSandbox(ns, "cascade").Volume(homeVolume(), "/home/agent").Obj())
	waitForPod(t, ns, "cascade")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cascade"}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-cascade"}}
	testwrap.Eventually(t, "service exists", exists(svc, true))
	testwrap.Eventually(t, "PVC exists", exists(pvc, true))

	if err := k8s.Delete(context.Background(), sb); err != nil {
		t.Fatalf("deleting sandbox: %v", err)
	}
	testwrap.Eventually(t, "pod garbage-collected", exists(podOf(ns, "cascade"), false))
	testwrap.Eventually(t, "service garbage-collected", exists(svc, false))
	testwrap.Eventually(t, "PVC garbage-collected", exists(pvc, false))
}

func TestSandboxRecreatesDeletedChildren(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "healer").Obj())
	pod := waitForPod(t, ns, "healer")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healer"}}
	testwrap.Eventually(t, "service exists", exists(svc, true))

	oldPod, oldSvc := pod.UID, svc.UID
	if err := k8s.Delete(context.Background(), pod); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	if err := k8s.Delete(context.Background(), svc); err != nil {
		t.Fatalf("deleting service: %v", err)
	}
	testwrap.Eventually(t, "pod recreated", func() error {
		p := podOf(ns, "healer")
		if err := exists(p, true)(); err != nil {
			return err
		}
		if p.UID == oldPod {
			return errors.New("still the old pod")
		}
		return nil
	})
	testwrap.Eventually(t, "service recreated", func() error {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "healer"}}
		if err := exists(s, true)(); err != nil {
			return err
		}
		if s.UID == oldSvc {
			return errors.New("still the old service")
		}
		return nil
	})
}

func TestSandboxNeverTouchesAPodItDoesNotOwn(t *testing.T) {
	ns := newNamespace(t)
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken", Labels: map[string]string{"owner": "someone-else"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "other:1"}}},
	}
	if err := k8s.Create(context.Background(), foreign); err != nil {
		t.Fatalf("creating foreign pod: %v", err)
	}
	sb := create(t, testwrap.MakeSandbox(ns, "taken").Obj())
	testwrap.Eventually(t, "Ready=False/PodNotOwned", readyIs(t, ns, "taken", metav1.ConditionFalse, agentsv1alpha1.ReasonPodNotOwned))

	patchReplicas(t, sb, 0) // a pause must not delete someone else's pod either
	testwrap.Eventually(t, "Ready=False/SandboxPaused", readyIs(t, ns, "taken", metav1.ConditionFalse, agentsv1alpha1.ReasonPaused))
	after := podOf(ns, "taken")
	if err := exists(after, true)(); err != nil {
		t.Fatalf("foreign pod: %s", err)
	}
	if after.ResourceVersion != foreign.ResourceVersion || len(after.OwnerReferences) != 0 {
		t.Errorf("foreign pod changed: resourceVersion %s→%s, owners %v", foreign.ResourceVersion, after.ResourceVersion, after.OwnerReferences)
	}
}

func TestSandboxPodMetadataFollowsTemplate(t *testing.T) {
	ns := newNamespace(t)
	create(t, testwrap.MakeSandbox(ns, "meta").PodLabels(map[string]string{"a": "1", "b": "2"}).Obj())
	pod := waitForPod(t, ns, "meta")

	// Someone else labels the pod; that label must survive template edits.
	patched := pod.DeepCopy()
	patched.Labels["external"] = "yes"
	if err := k8s.Patch(context.Background(), patched, client.MergeFrom(pod)); err != nil {
		t.Fatalf("labelling pod: %v", err)
	}

	edit(t, getSandbox(t, ns, "meta"), func(sb *agentsv1alpha1.Sandbox) {
		sb.Spec.PodTemplate.Metadata.Labels = map[string]string{"a": "changed", "c": "3"}
	})
	testwrap.Eventually(t, "pod labels follow the template", func() error {
		p := podOf(ns, "meta")
		if err := exists(p, true)(); err != nil {
			return err
		}
		l := p.Labels
		if l["a"] != "changed" || l["c"] != "3" || l["external"] != "yes" || l[agentsv1alpha1.SandboxNameHashLabel] == "" {
			return fmt.Errorf("labels = %v", l)
		}
		if _, stale := l["b"]; stale {
			return fmt.Errorf("label b removed from the template is still on the pod: %v", l)
		}
		return nil
	})
	if p := podOf(ns, "meta"); exists(p, true)() == nil && p.UID != pod.UID {
		t.Errorf("metadata change recreated the pod")
	}
}

func patchReplicas(t *testing.T, sb *agentsv1alpha1.Sandbox, n int32) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	obj := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name}}
	if err := k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("setting replicas to %d: %v", n, err)
	}
}
