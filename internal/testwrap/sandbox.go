package testwrap

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// SandboxWrapper builds a v1alpha1 Sandbox.
type SandboxWrapper struct {
	obj agentsv1alpha1.Sandbox
	objectMeta[*SandboxWrapper]
	podMetadata[*SandboxWrapper]
	podSpec[*SandboxWrapper]
}

// MakeSandbox starts a Sandbox ns/name whose pod runs RuntimeContainer.
func MakeSandbox(ns, name string) *SandboxWrapper {
	w := &SandboxWrapper{obj: agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	w.obj.Spec.PodTemplate.Spec.Containers = []corev1.Container{RuntimeContainer()}
	return w.bind()
}

func (w *SandboxWrapper) bind() *SandboxWrapper {
	pt := &w.obj.Spec.PodTemplate
	w.objectMeta = objectMeta[*SandboxWrapper]{w, &w.obj.ObjectMeta}
	w.podMetadata = podMetadata[*SandboxWrapper]{w, &pt.Metadata.Labels, &pt.Metadata.Annotations}
	w.podSpec = podSpec[*SandboxWrapper]{w, &pt.Spec}
	return w
}

// Obj returns a copy of the Sandbox built so far.
func (w *SandboxWrapper) Obj() *agentsv1alpha1.Sandbox { return w.obj.DeepCopy() }

// Clone returns an independent wrapper with the same Sandbox, to vary a common base.
func (w *SandboxWrapper) Clone() *SandboxWrapper {
	return (&SandboxWrapper{obj: *w.obj.DeepCopy()}).bind()
}

// Generation sets metadata.generation, as the API server does on each spec change (1 at create).
func (w *SandboxWrapper) Generation(n int64) *SandboxWrapper {
	w.obj.Generation = n
	return w
}

// Replicas sets spec.replicas (0 pauses the Sandbox).
func (w *SandboxWrapper) Replicas(n int32) *SandboxWrapper {
	w.obj.Spec.Replicas = ptr.To(n)
	return w
}

// ShutdownTime sets spec.shutdownTime.
func (w *SandboxWrapper) ShutdownTime(at time.Time) *SandboxWrapper {
	w.obj.Spec.ShutdownTime = &metav1.Time{Time: at}
	return w
}

// ShutdownPolicy sets spec.shutdownPolicy.
func (w *SandboxWrapper) ShutdownPolicy(p agentsv1alpha1.ShutdownPolicy) *SandboxWrapper {
	w.obj.Spec.ShutdownPolicy = ptr.To(p)
	return w
}

// Volume adds a volume claim template and, unless mountPath is empty, mounts it there in the
// first container.
func (w *SandboxWrapper) Volume(vct agentsv1alpha1.PersistentVolumeClaimTemplate, mountPath string) *SandboxWrapper {
	w.obj.Spec.VolumeClaimTemplates = append(w.obj.Spec.VolumeClaimTemplates, vct)
	if mountPath != "" {
		w.VolumeMount(vct.Name, mountPath)
	}
	return w
}

// Condition sets a status condition (replacing one of its type), as the controller would.
func (w *SandboxWrapper) Condition(c metav1.Condition) *SandboxWrapper {
	setCondition(&w.obj.Status.Conditions, c)
	return w
}

// PodIPs sets status.podIPs.
func (w *SandboxWrapper) PodIPs(ips ...string) *SandboxWrapper {
	w.obj.Status.PodIPs = ips
	return w
}

// ReadyWith reports the Sandbox Ready (reason SandboxReady) with the pod IPs, as the Sandbox
// controller does once its pod serves.
func (w *SandboxWrapper) ReadyWith(podIPs ...string) *SandboxWrapper {
	return w.PodIPs(podIPs...).Condition(metav1.Condition{
		Type: agentsv1alpha1.SandboxConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1alpha1.ReasonReady})
}

// VolumeClaimWrapper builds a volume claim template.
type VolumeClaimWrapper struct {
	obj agentsv1alpha1.PersistentVolumeClaimTemplate
}

// MakeVolumeClaim starts a ReadWriteOnce volume claim template name requesting size (e.g. "1Gi")
// of storage.
func MakeVolumeClaim(name, size string) *VolumeClaimWrapper {
	return &VolumeClaimWrapper{obj: agentsv1alpha1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1alpha1.EmbeddedObjectMetadata{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}}
}

// Label sets a label of the PersistentVolumeClaims made from the template.
func (w *VolumeClaimWrapper) Label(key, value string) *VolumeClaimWrapper {
	w.obj.Labels = with(w.obj.Labels, key, value)
	return w
}

// StorageClass sets spec.storageClassName.
func (w *VolumeClaimWrapper) StorageClass(name string) *VolumeClaimWrapper {
	w.obj.Spec.StorageClassName = ptr.To(name)
	return w
}

// Obj returns the v1alpha1 volume claim template.
func (w *VolumeClaimWrapper) Obj() agentsv1alpha1.PersistentVolumeClaimTemplate {
	return *w.obj.DeepCopy()
}

// ObjV1beta1 returns the same volume claim template in v1beta1.
func (w *VolumeClaimWrapper) ObjV1beta1() agentsv1beta1.PersistentVolumeClaimTemplate {
	o := w.obj.DeepCopy()
	return agentsv1beta1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations},
		Spec:                   o.Spec,
	}
}
