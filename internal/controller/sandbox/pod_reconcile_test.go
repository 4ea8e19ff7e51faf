package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/expectations"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The pod is the template's: its containers, labels and annotations, the volume claim templates
// pointed at the Sandbox's PVCs, the identity labels the controller alone sets, and the pool
// labels of the Sandbox mirrored; never the router's identity.
func TestPodIsMadeFromThePodTemplate(t *testing.T) {
	sb := aSandbox().
		Label(extv1beta1.WarmPoolLabel, "pool-hash").
		PodLabel("team", "a").PodLabel("app", "sandbox-router").
		PodAnnotation("example.com/note", "hi").
		Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home/user").Hub()
	g := newRig(t, []client.Object{sb})
	g.reconcile()

	pod := g.pod()
	if pod == nil {
		t.Fatal("no pod was created")
	}
	wantLabels := map[string]string{
		"team":                             "a",
		extv1beta1.WarmPoolLabel:           "pool-hash",
		agentsv1beta1.SandboxNameHashLabel: agentsv1beta1.NameHash(testSB),
		agentsv1beta1.SandboxNameLabel:     testSB,
		agentsv1beta1.SandboxPodLabel:      agentsv1beta1.SandboxPodLabelValue,
	}
	if d := cmp.Diff(wantLabels, pod.Labels); d != "" {
		t.Errorf("pod labels (-want +got):\n%s", d)
	}
	if got := pod.Annotations["example.com/note"]; got != "hi" {
		t.Errorf("pod annotation example.com/note = %q, want the template's \"hi\"", got)
	}
	// The template's containers, with the hardening every sandbox pod gets where it says nothing.
	wantContainers := sb.DeepCopy().Spec.PodTemplate.Spec.Containers
	for i := range wantContainers {
		wantContainers[i].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	}
	if d := cmp.Diff(wantContainers, pod.Spec.Containers); d != "" {
		t.Errorf("pod containers (-template, hardened +pod):\n%s", d)
	}
	wantVolumes := []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName("home", testSB)}}}}
	if d := cmp.Diff(wantVolumes, pod.Spec.Volumes); d != "" {
		t.Errorf("pod volumes (-want +got):\n%s", d)
	}
	events := g.drainEvents()
	if len(events) != 1 || !strings.Contains(events[0], agentsv1beta1.EventRouterLabelsRefused) || !strings.Contains(events[0], "app=sandbox-router") {
		t.Errorf("events %q, want one %s warning naming app=sandbox-router", events, agentsv1beta1.EventRouterLabelsRefused)
	}
}

// replicas: 0 pauses: the pod goes, the volumes and the Service (the Sandbox's DNS name) stay;
// replicas: 1 brings a new pod on the same volumes.
func TestPauseDeletesThePodAndKeepsVolumesAndService(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").Hub()})
	g.reconcile()
	g.podRunsReady()
	g.reconcile()

	sb := g.sandbox()
	g.update(sb, func() { sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	g.reconcile()
	if g.pod() != nil {
		t.Error("the pod of a paused Sandbox still exists")
	}
	g.reconcile() // brought by the pod's deletion
	if g.pvc(PVCName("home", testSB)) == nil || g.service() == nil {
		t.Error("pausing deleted the PVC or the Service, want both kept")
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPaused)
	if st := g.sandbox().Status; st.Replicas != 0 || st.PodIPs != nil || st.ServiceFQDN == "" {
		t.Errorf("paused status replicas=%d podIPs=%v serviceFQDN=%q, want 0, none, and the FQDN kept", st.Replicas, st.PodIPs, st.ServiceFQDN)
	}

	sb = g.sandbox()
	g.update(sb, func() { sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	g.reconcile()
	if pod := g.pod(); pod == nil || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != PVCName("home", testSB) {
		t.Errorf("after resuming, pod %v, want a new pod on the kept PVC", pod)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)
}

// A pod still terminating holds its name: on resume no new pod is created until it is gone
// (its deletion event brings the next pass), and the status says why.
func TestResumeWaitsForTheTerminatingPod(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.reconcile()
	pod := g.pod()
	g.update(pod, func() { pod.Finalizers = []string{"example.com/drain"} })
	if err := g.api.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}

	g.reconcile()
	if n := g.count("create", "Pod"); n != 1 {
		t.Errorf("pods created %d times, want 1: no new pod while the old one terminates", n)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodTerminating)
}

// A pod of the Sandbox's name that it does not control is someone else's: never patched nor
// deleted, running or paused, and named in the status.
func TestAPodOfSomeoneElseIsNeverTouched(t *testing.T) {
	theirs := foreign(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSB, Labels: map[string]string{"app": "theirs"}}})
	for _, replicas := range []int32{agentsv1beta1.RunningReplicas, agentsv1beta1.PausedReplicas} {
		g := newRig(t, []client.Object{aSandbox().Replicas(replicas).Hub(), theirs.DeepCopy()})
		g.reconcile()
		if n := g.count("patch", "Pod") + g.count("delete", "Pod") + g.count("create", "Pod"); n != 0 {
			t.Errorf("replicas %d: %d writes to the pod, want none: %v", replicas, n, g.writesSince(0))
		}
		if pod := g.pod(); pod == nil || pod.Labels["app"] != "theirs" {
			t.Errorf("replicas %d: their pod is now %v, want it unchanged", replicas, pod)
		}
		if replicas == agentsv1beta1.RunningReplicas {
			g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodNotOwned)
		}
	}
}

// A reconcile woken by another child's event may run before the cache shows the pod created a
// moment ago: it must not create it again, nor report it missing.
func TestAPodCreatedMomentsAgoIsNotCreatedAgain(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.hide("Pod")
	g.reconcile()
	g.reconcile()
	if n := g.count("create", "Pod"); n != 1 {
		t.Errorf("pod created %d times while the cache lagged, want 1", n)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)
	if r := g.sandbox().Status.Replicas; r != 1 {
		t.Errorf("status.replicas = %d, want 1 (the pod exists)", r)
	}
}

// The cache holds only pods with the tracking label. When a create meets a pod it cannot see,
// the pod is read from the API: the Sandbox's own (someone stripped its labels) gets them back;
// someone else's is left as it is. Neither is an error.
func TestACreateThatMeetsAnUncachedPod(t *testing.T) {
	sb := aSandbox().Hub()
	ours := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSB,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, sandboxGVK)}}}
	theirs := foreign(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSB}})
	tests := []struct {
		name       string
		pod        *corev1.Pod
		wantLabels bool
		wantReason string
	}{
		{"ours without its labels gets them back", ours, true, agentsv1beta1.ReasonPodPending},
		{"someone else's stays as it is", theirs, false, agentsv1beta1.ReasonPodNotOwned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, []client.Object{sb.DeepCopy(), tt.pod.DeepCopy()})
			g.hide("Pod")
			if _, err := g.reconcileErr(); err != nil {
				t.Fatalf("Reconcile = %v, want AlreadyExists handled", err)
			}
			got := g.pod().Labels[agentsv1beta1.SandboxNameHashLabel]
			if tt.wantLabels != (got == agentsv1beta1.NameHash(testSB)) {
				t.Errorf("pod tracking label %q; want it restored: %v", got, tt.wantLabels)
			}
			g.wantReady(metav1.ConditionFalse, tt.wantReason)
		})
	}
}

// Label and annotation changes of the template reach the running pod; keys the controller put
// there and the template dropped go, keys others added stay, and the spec is never touched (a
// change would need a restart the user did not ask for).
func TestTemplateMetadataChangesReachTheRunningPodAndNothingElse(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().PodLabel("tier", "free").PodLabel("old", "1").Hub()})
	g.reconcile()
	pod := g.pod()
	g.update(pod, func() { pod.Labels["added-by-someone"] = "x" })

	sb := g.sandbox()
	g.update(sb, func() {
		sb.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"tier": "paid"}
		sb.Spec.PodTemplate.Spec.Containers[0].Image = "sandbox-runtime:v2"
	})
	g.reconcile()

	pod = g.pod()
	for k, want := range map[string]string{"tier": "paid", "old": "", "added-by-someone": "x"} {
		if got := pod.Labels[k]; got != want {
			t.Errorf("pod label %s = %q, want %q", k, got, want)
		}
	}
	if img := pod.Spec.Containers[0].Image; img != testwrap.RuntimeImage {
		t.Errorf("pod image = %s, want it left at %s (no restart behind the user's back)", img, testwrap.RuntimeImage)
	}
	if n := g.count("create", "Pod") + g.count("delete", "Pod"); n != 1 {
		t.Errorf("%d pod creates and deletes, want only the first create", n)
	}
}

// Pausing races with someone replacing the pod: a delete refused on its UID precondition (or
// finding nothing) means the pod seen is gone already, no error to retry.
func TestPauseToleratesAPodAlreadyGoneOrReplaced(t *testing.T) {
	for _, refusal := range []error{conflict("Pod"), notFound("pods")} {
		g := newRig(t, []client.Object{aSandbox().Hub()})
		g.reconcile()
		sb := g.sandbox()
		g.update(sb, func() { sb.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
		g.refuse("delete", "Pod", refusal)
		if _, err := g.reconcileErr(); err != nil {
			t.Errorf("delete refused with %v: Reconcile = %v, want no error", refusal, err)
		}
	}
}

// A pod created long ago that the cache still does not show is no longer trusted: after the
// expectation lapses the controller asks the API again rather than believing a pod exists.
func TestACreatedPodIsTrustedOnlyForTheCacheLag(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.hide("Pod")
	g.reconcile()
	if err := g.api.Delete(context.Background(), g.pod()); err != nil {
		t.Fatal(err)
	}
	g.clock.Step(expectations.CacheLag + time.Second)
	g.reconcile()
	if n := g.count("create", "Pod"); n != 2 {
		t.Errorf("pod created %d times, want 2: the lost pod is made again once the expectation lapses", n)
	}
	if g.pod() == nil {
		t.Error("no pod after the expectation lapsed")
	}
}

// A child created and deleted before the cache showed it (a watch delivers both events before
// the next reconcile) is made again by that reconcile: its delete event drops the expectation
// that would otherwise stand in for it until the cache lag passed, with nothing to wake the
// controller then.
func TestAChildDeletedBeforeTheCacheShowedItIsMadeAgainAtOnce(t *testing.T) {
	tests := []struct {
		kind string
		get  func(g *rig) client.Object
	}{
		{"Pod", func(g *rig) client.Object { return orNil(g.pod()) }},
		{"Service", func(g *rig) client.Object { return orNil(g.service()) }},
		{"NetworkPolicy", func(g *rig) client.Object { return orNil(g.policy()) }},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			g := newRig(t, []client.Object{aSandbox().Hub()})
			g.hide(tt.kind)
			g.reconcile()
			first := tt.get(g)
			if first == nil {
				t.Fatalf("the first reconcile made no %s", tt.kind)
			}
			if err := g.api.Delete(context.Background(), first); err != nil {
				t.Fatal(err)
			}
			g.r.forgetDeletedChild(first)
			g.reconcile()
			if n := g.count("create", tt.kind); n != 2 {
				t.Fatalf("%s created %d times, want 2: the deleted one is made again without waiting out the cache lag", tt.kind, n)
			}
			if again := tt.get(g); again == nil || again.GetUID() == first.GetUID() {
				t.Errorf("no new %s after the delete event", tt.kind)
			}
		})
	}
}

// orNil turns a typed nil into an untyped one, so a missing object compares equal to nil.
func orNil[T client.Object](obj T) client.Object {
	if client.Object(obj) == client.Object(*new(T)) {
		return nil
	}
	return obj
}
