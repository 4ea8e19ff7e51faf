package testwrap

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// The v1beta1 variants: objects as upstream's clients write them.

// SandboxV1beta1Wrapper builds a v1beta1 Sandbox.
type SandboxV1beta1Wrapper struct {
	obj agentsv1beta1.Sandbox
	objectMeta[*SandboxV1beta1Wrapper]
	podMetadata[*SandboxV1beta1Wrapper]
	podSpec[*SandboxV1beta1Wrapper]
}

// MakeSandboxV1beta1 starts a v1beta1 Sandbox ns/name whose pod runs RuntimeContainer.
func MakeSandboxV1beta1(ns, name string) *SandboxV1beta1Wrapper {
	w := &SandboxV1beta1Wrapper{obj: agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	w.obj.Spec.PodTemplate.Spec.Containers = []corev1.Container{RuntimeContainer()}
	return w.bind()
}

func (w *SandboxV1beta1Wrapper) bind() *SandboxV1beta1Wrapper {
	pt := &w.obj.Spec.PodTemplate
	w.objectMeta = objectMeta[*SandboxV1beta1Wrapper]{w, &w.obj.ObjectMeta}
	w.podMetadata = podMetadata[*SandboxV1beta1Wrapper]{w, &pt.ObjectMeta.Labels, &pt.ObjectMeta.Annotations}
	w.podSpec = podSpec[*SandboxV1beta1Wrapper]{w, &pt.Spec}
	return w
}

// Obj returns a copy of the v1beta1 Sandbox built so far.
func (w *SandboxV1beta1Wrapper) Obj() *agentsv1beta1.Sandbox { return w.obj.DeepCopy() }

// Service sets spec.service.
func (w *SandboxV1beta1Wrapper) Service(on bool) *SandboxV1beta1Wrapper {
	w.obj.Spec.Service = ptr.To(on)
	return w
}

// VolumeClaimTemplates adds volume claim templates.
func (w *SandboxV1beta1Wrapper) VolumeClaimTemplates(vcts ...agentsv1beta1.PersistentVolumeClaimTemplate) *SandboxV1beta1Wrapper {
	w.obj.Spec.VolumeClaimTemplates = append(w.obj.Spec.VolumeClaimTemplates, vcts...)
	return w
}

// TemplateV1beta1Wrapper builds a v1beta1 SandboxTemplate.
type TemplateV1beta1Wrapper struct {
	obj extv1beta1.SandboxTemplate
	objectMeta[*TemplateV1beta1Wrapper]
	podMetadata[*TemplateV1beta1Wrapper]
	podSpec[*TemplateV1beta1Wrapper]
}

// MakeTemplateV1beta1 starts a v1beta1 SandboxTemplate ns/name whose pods run RuntimeContainer.
func MakeTemplateV1beta1(ns, name string) *TemplateV1beta1Wrapper {
	w := &TemplateV1beta1Wrapper{obj: extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	w.obj.Spec.PodTemplate.Spec.Containers = []corev1.Container{RuntimeContainer()}
	return w.bind()
}

func (w *TemplateV1beta1Wrapper) bind() *TemplateV1beta1Wrapper {
	pt := &w.obj.Spec.PodTemplate
	w.objectMeta = objectMeta[*TemplateV1beta1Wrapper]{w, &w.obj.ObjectMeta}
	w.podMetadata = podMetadata[*TemplateV1beta1Wrapper]{w, &pt.ObjectMeta.Labels, &pt.ObjectMeta.Annotations}
	w.podSpec = podSpec[*TemplateV1beta1Wrapper]{w, &pt.Spec}
	return w
}

// Obj returns a copy of the v1beta1 SandboxTemplate built so far.
func (w *TemplateV1beta1Wrapper) Obj() *extv1beta1.SandboxTemplate { return w.obj.DeepCopy() }

// VolumeClaimTemplates adds volume claim templates.
func (w *TemplateV1beta1Wrapper) VolumeClaimTemplates(vcts ...agentsv1beta1.PersistentVolumeClaimTemplate) *TemplateV1beta1Wrapper {
	w.obj.Spec.VolumeClaimTemplates = append(w.obj.Spec.VolumeClaimTemplates, vcts...)
	return w
}

// VolumeClaimTemplatesPolicy sets what claims' own volume claim templates may do.
func (w *TemplateV1beta1Wrapper) VolumeClaimTemplatesPolicy(p extv1beta1.VolumeClaimTemplatesPolicy) *TemplateV1beta1Wrapper {
	w.obj.Spec.VolumeClaimTemplatesPolicy = p
	return w
}

// ClaimV1beta1Wrapper builds a v1beta1 SandboxClaim.
type ClaimV1beta1Wrapper struct {
	obj extv1beta1.SandboxClaim
	objectMeta[*ClaimV1beta1Wrapper]
}

// MakeClaimV1beta1 starts a v1beta1 SandboxClaim ns/name; WarmPool names its pool (v1beta1
// claims name a pool, not a template).
func MakeClaimV1beta1(ns, name string) *ClaimV1beta1Wrapper {
	w := &ClaimV1beta1Wrapper{obj: extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	w.objectMeta = objectMeta[*ClaimV1beta1Wrapper]{w, &w.obj.ObjectMeta}
	return w
}

// Obj returns a copy of the v1beta1 SandboxClaim built so far.
func (w *ClaimV1beta1Wrapper) Obj() *extv1beta1.SandboxClaim { return w.obj.DeepCopy() }

// WarmPool sets spec.warmPoolRef.name.
func (w *ClaimV1beta1Wrapper) WarmPool(name string) *ClaimV1beta1Wrapper {
	w.obj.Spec.WarmPoolRef.Name = name
	return w
}

// VolumeClaimTemplates adds the claim's own volume claim templates.
func (w *ClaimV1beta1Wrapper) VolumeClaimTemplates(vcts ...agentsv1beta1.PersistentVolumeClaimTemplate) *ClaimV1beta1Wrapper {
	w.obj.Spec.VolumeClaimTemplates = append(w.obj.Spec.VolumeClaimTemplates, vcts...)
	return w
}
