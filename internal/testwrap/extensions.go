package testwrap

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// TemplateWrapper builds a v1alpha1 SandboxTemplate.
type TemplateWrapper struct {
	obj extv1alpha1.SandboxTemplate
	objectMeta[*TemplateWrapper]
	podMetadata[*TemplateWrapper]
	podSpec[*TemplateWrapper]
}

// MakeTemplate starts a SandboxTemplate ns/name whose pods run RuntimeContainer.
func MakeTemplate(ns, name string) *TemplateWrapper {
	w := &TemplateWrapper{obj: extv1alpha1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	w.obj.Spec.PodTemplate.Spec.Containers = []corev1.Container{RuntimeContainer()}
	return w.bind()
}

func (w *TemplateWrapper) bind() *TemplateWrapper {
	pt := &w.obj.Spec.PodTemplate
	w.objectMeta = objectMeta[*TemplateWrapper]{w, &w.obj.ObjectMeta}
	w.podMetadata = podMetadata[*TemplateWrapper]{w, &pt.Metadata.Labels, &pt.Metadata.Annotations}
	w.podSpec = podSpec[*TemplateWrapper]{w, &pt.Spec}
	return w
}

// Obj returns a copy of the SandboxTemplate built so far.
func (w *TemplateWrapper) Obj() *extv1alpha1.SandboxTemplate { return w.obj.DeepCopy() }

// Clone returns an independent wrapper with the same SandboxTemplate.
func (w *TemplateWrapper) Clone() *TemplateWrapper {
	return (&TemplateWrapper{obj: *w.obj.DeepCopy()}).bind()
}

// Volume adds a volume claim template and, unless mountPath is empty, mounts it there in the
// first container.
func (w *TemplateWrapper) Volume(vct agentsv1alpha1.PersistentVolumeClaimTemplate, mountPath string) *TemplateWrapper {
	w.obj.Spec.VolumeClaimTemplates = append(w.obj.Spec.VolumeClaimTemplates, vct)
	if mountPath != "" {
		w.VolumeMount(vct.Name, mountPath)
	}
	return w
}

// EnvInjection sets spec.envVarsInjectionPolicy: what a claim's env may do.
func (w *TemplateWrapper) EnvInjection(p extv1alpha1.EnvVarsInjectionPolicy) *TemplateWrapper {
	w.obj.Spec.EnvVarsInjectionPolicy = p
	return w
}

// NetworkPolicy sets the template's own NetworkPolicy rules (instead of the secure default).
func (w *TemplateWrapper) NetworkPolicy(np *extv1alpha1.NetworkPolicySpec) *TemplateWrapper {
	w.obj.Spec.NetworkPolicy = np
	return w
}

// NetworkPolicyManagement sets spec.networkPolicyManagement.
func (w *TemplateWrapper) NetworkPolicyManagement(m extv1alpha1.NetworkPolicyManagement) *TemplateWrapper {
	w.obj.Spec.NetworkPolicyManagement = m
	return w
}

// ClaimWrapper builds a v1alpha1 SandboxClaim.
type ClaimWrapper struct {
	obj extv1alpha1.SandboxClaim
	objectMeta[*ClaimWrapper]
	podMetadata[*ClaimWrapper] // spec.additionalPodMetadata
}

// MakeClaim starts a SandboxClaim ns/name; Template names its SandboxTemplate.
func MakeClaim(ns, name string) *ClaimWrapper {
	w := &ClaimWrapper{obj: extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	return w.bind()
}

func (w *ClaimWrapper) bind() *ClaimWrapper {
	md := &w.obj.Spec.AdditionalPodMetadata
	w.objectMeta = objectMeta[*ClaimWrapper]{w, &w.obj.ObjectMeta}
	w.podMetadata = podMetadata[*ClaimWrapper]{w, &md.Labels, &md.Annotations}
	return w
}

// Obj returns a copy of the SandboxClaim built so far.
func (w *ClaimWrapper) Obj() *extv1alpha1.SandboxClaim { return w.obj.DeepCopy() }

// Clone returns an independent wrapper with the same SandboxClaim.
func (w *ClaimWrapper) Clone() *ClaimWrapper {
	return (&ClaimWrapper{obj: *w.obj.DeepCopy()}).bind()
}

// Template sets spec.sandboxTemplateRef.name.
func (w *ClaimWrapper) Template(name string) *ClaimWrapper {
	w.obj.Spec.TemplateRef.Name = name
	return w
}

// WarmPool sets spec.warmpool: "none", "default" or a pool's name.
func (w *ClaimWrapper) WarmPool(policy string) *ClaimWrapper {
	w.obj.Spec.WarmPool = ptr.To(extv1alpha1.WarmPoolPolicy(policy))
	return w
}

// Env adds a variable to spec.env, for the first container of the template.
func (w *ClaimWrapper) Env(name, value string) *ClaimWrapper {
	return w.EnvVars(extv1alpha1.EnvVar{Name: name, Value: value})
}

// EnvVars adds variables to spec.env.
func (w *ClaimWrapper) EnvVars(vars ...extv1alpha1.EnvVar) *ClaimWrapper {
	w.obj.Spec.Env = append(w.obj.Spec.Env, vars...)
	return w
}

func (w *ClaimWrapper) lifecycle() *extv1alpha1.Lifecycle {
	if w.obj.Spec.Lifecycle == nil {
		w.obj.Spec.Lifecycle = &extv1alpha1.Lifecycle{}
	}
	return w.obj.Spec.Lifecycle
}

// ShutdownTime sets spec.lifecycle.shutdownTime.
func (w *ClaimWrapper) ShutdownTime(at time.Time) *ClaimWrapper {
	w.lifecycle().ShutdownTime = &metav1.Time{Time: at}
	return w
}

// ShutdownPolicy sets spec.lifecycle.shutdownPolicy.
func (w *ClaimWrapper) ShutdownPolicy(p extv1alpha1.ShutdownPolicy) *ClaimWrapper {
	w.lifecycle().ShutdownPolicy = p
	return w
}

// TTLAfterFinished sets spec.lifecycle.ttlSecondsAfterFinished.
func (w *ClaimWrapper) TTLAfterFinished(seconds int32) *ClaimWrapper {
	w.lifecycle().TTLSecondsAfterFinished = ptr.To(seconds)
	return w
}

// Condition sets a status condition (replacing one of its type), as the controller would.
func (w *ClaimWrapper) Condition(c metav1.Condition) *ClaimWrapper {
	setCondition(&w.obj.Status.Conditions, c)
	return w
}

// SandboxStatus sets status.sandbox: the Sandbox serving the claim and its pod IPs.
func (w *ClaimWrapper) SandboxStatus(sandbox string, podIPs ...string) *ClaimWrapper {
	w.obj.Status.SandboxStatus = extv1alpha1.SandboxStatus{Name: sandbox, PodIPs: podIPs}
	return w
}

// ReadyWith reports the claim Ready (reason DependenciesReady), served by sandbox at podIPs.
func (w *ClaimWrapper) ReadyWith(sandbox string, podIPs ...string) *ClaimWrapper {
	return w.SandboxStatus(sandbox, podIPs...).Condition(metav1.Condition{
		Type: extv1alpha1.ClaimConditionReady, Status: metav1.ConditionTrue, Reason: "DependenciesReady"})
}

// WarmPoolWrapper builds a v1alpha1 SandboxWarmPool.
type WarmPoolWrapper struct {
	obj extv1alpha1.SandboxWarmPool
	objectMeta[*WarmPoolWrapper]
}

// MakeWarmPool starts a SandboxWarmPool ns/name of no replicas; Template and Replicas fill it.
func MakeWarmPool(ns, name string) *WarmPoolWrapper {
	w := &WarmPoolWrapper{obj: extv1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
	return w.bind()
}

func (w *WarmPoolWrapper) bind() *WarmPoolWrapper {
	w.objectMeta = objectMeta[*WarmPoolWrapper]{w, &w.obj.ObjectMeta}
	return w
}

// Obj returns a copy of the SandboxWarmPool built so far.
func (w *WarmPoolWrapper) Obj() *extv1alpha1.SandboxWarmPool { return w.obj.DeepCopy() }

// Clone returns an independent wrapper with the same SandboxWarmPool.
func (w *WarmPoolWrapper) Clone() *WarmPoolWrapper {
	return (&WarmPoolWrapper{obj: *w.obj.DeepCopy()}).bind()
}

// Template sets spec.sandboxTemplateRef.name.
func (w *WarmPoolWrapper) Template(name string) *WarmPoolWrapper {
	w.obj.Spec.TemplateRef.Name = name
	return w
}

// Replicas sets spec.replicas.
func (w *WarmPoolWrapper) Replicas(n int32) *WarmPoolWrapper {
	w.obj.Spec.Replicas = n
	return w
}

// UpdateStrategy sets spec.updateStrategy.type.
func (w *WarmPoolWrapper) UpdateStrategy(t extv1alpha1.SandboxWarmPoolUpdateStrategyType) *WarmPoolWrapper {
	w.obj.Spec.UpdateStrategy.Type = t
	return w
}

// Autoscaling sets spec.autoscaling's minReplicas and maxReplicas (its other fields default).
func (w *WarmPoolWrapper) Autoscaling(minReplicas, maxReplicas int32) *WarmPoolWrapper {
	w.autoscaling().MinReplicas, w.autoscaling().MaxReplicas = &minReplicas, maxReplicas
	return w
}

// AutoscaleHeadroom sets spec.autoscaling.headroomSeconds.
func (w *WarmPoolWrapper) AutoscaleHeadroom(seconds int32) *WarmPoolWrapper {
	w.autoscaling().HeadroomSeconds = &seconds
	return w
}

// AutoscaleWindow sets spec.autoscaling.window.
func (w *WarmPoolWrapper) AutoscaleWindow(d time.Duration) *WarmPoolWrapper {
	w.autoscaling().Window = &metav1.Duration{Duration: d}
	return w
}

// ScaleDownStabilization sets spec.autoscaling.scaleDownStabilization.
func (w *WarmPoolWrapper) ScaleDownStabilization(d time.Duration) *WarmPoolWrapper {
	w.autoscaling().ScaleDownStabilization = &metav1.Duration{Duration: d}
	return w
}

// ScaleToZeroAfter sets spec.autoscaling.scaleToZeroAfter.
func (w *WarmPoolWrapper) ScaleToZeroAfter(d time.Duration) *WarmPoolWrapper {
	w.autoscaling().ScaleToZeroAfter = &metav1.Duration{Duration: d}
	return w
}

func (w *WarmPoolWrapper) autoscaling() *extv1alpha1.SandboxWarmPoolAutoscaling {
	if w.obj.Spec.Autoscaling == nil {
		w.obj.Spec.Autoscaling = &extv1alpha1.SandboxWarmPoolAutoscaling{}
	}
	return w.obj.Spec.Autoscaling
}
