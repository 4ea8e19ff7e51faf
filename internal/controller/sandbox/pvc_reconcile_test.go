package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A volume claim template becomes a PVC named <template>-<sandbox>, as a StatefulSet names it,
// with the template's labels and spec, the tracking labels, and the Sandbox as its controller
// (so the PVC goes with the Sandbox, not with its pod).
func TestPVCIsMadeFromTheVolumeClaimTemplate(t *testing.T) {
	vct := testwrap.MakeVolumeClaim("home", "2Gi").Label("backup", "daily").StorageClass("fast").Hub()
	g := newRig(t, []client.Object{aSandbox().Volume(agentsv1alpha1.PersistentVolumeClaimTemplate{EmbeddedObjectMetadata: agentsv1alpha1.EmbeddedObjectMetadata(vct.EmbeddedObjectMetadata), Spec: vct.Spec}, "/home").Hub()})
	g.reconcile()

	pvc := g.pvc("home-" + testSB)
	if pvc == nil {
		t.Fatal("no PVC home-s1 was created")
	}
	ownedBy(t, pvc)
	wantLabels := map[string]string{"backup": "daily", agentsv1beta1.SandboxNameHashLabel: agentsv1beta1.NameHash(testSB), agentsv1beta1.SandboxNameLabel: testSB}
	if d := cmp.Diff(wantLabels, pvc.Labels); d != "" {
		t.Errorf("PVC labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(vct.Spec, pvc.Spec); d != "" {
		t.Errorf("PVC spec (-template +PVC):\n%s", d)
	}
}

// An existing PVC holds the user's data and a PVC spec is mostly immutable: a changed template
// never touches it.
func TestAnExistingPVCIsNeverChanged(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").Hub()})
	g.reconcile()
	sb := g.sandbox()
	g.update(sb, func() {
		sb.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
	})
	g.reconcile()
	if n := g.count("create", "PersistentVolumeClaim") + g.count("patch", "PersistentVolumeClaim") + g.count("update", "PersistentVolumeClaim"); n != 1 {
		t.Errorf("%d PVC writes, want only the first create", n)
	}
	if got := g.pvc("home-" + testSB).Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("PVC size = %s, want it left at 1Gi", got.String())
	}
}

// A PVC of that name that another object controls holds someone else's data: the pod is not
// made (it would mount it), and the error says whose it is. One nobody controls is used, as a
// StatefulSet would (a restored volume, for instance).
func TestAPVCOfTheSameNameMadeBySomeoneElse(t *testing.T) {
	pvcNamed := func() *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "home-" + testSB}}
	}
	tests := []struct {
		name      string
		pvc       *corev1.PersistentVolumeClaim
		wantPod   bool
		wantErr   bool
		wantReady string
	}{
		{"controlled by another object: no pod", foreign(pvcNamed()), false, true, agentsv1beta1.ReasonReconcilerError},
		{"controlled by nobody: used", pvcNamed(), true, false, agentsv1beta1.ReasonPodPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, []client.Object{aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").Hub(), tt.pvc})
			_, err := g.reconcileErr()
			if (err != nil) != tt.wantErr {
				t.Errorf("Reconcile = %v, want an error: %v", err, tt.wantErr)
			}
			if (g.pod() != nil) != tt.wantPod {
				t.Errorf("pod exists: %v, want %v", g.pod() != nil, tt.wantPod)
			}
			if n := g.count("create", "PersistentVolumeClaim") + g.count("patch", "PersistentVolumeClaim"); n != 0 {
				t.Errorf("%d writes to the existing PVC, want none", n)
			}
			g.wantReady(metav1.ConditionFalse, tt.wantReady)
		})
	}
}

// A PVC the cache does not show yet answers the create with AlreadyExists: that is no error.
func TestAPVCCreatedMomentsAgoIsNoError(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home").Hub()})
	g.hide("PersistentVolumeClaim")
	g.reconcile()
	if _, err := g.reconcileErr(); err != nil {
		t.Errorf("second pass with the PVC not in the cache: Reconcile = %v, want no error", err)
	}
	g.wantReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)
}
