package blueprint

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// hardeningRevision names the set of defaults harden applies. It is part of every template's
// hash: when the defaults change, warm Sandboxes built with the old ones become stale and the
// pools roll onto the new ones.
const hardeningRevision = "1"

// defaultsKey is what this builder adds to a template's pod spec, for the template's hash.
func (b Builder) defaultsKey(spec *corev1.PodSpec) string {
	key := "hardening=" + hardeningRevision
	if rc := b.runtimeClassFor(spec); rc != nil {
		key += ",runtimeClassName=" + *rc
	}
	return key
}

// applyRuntimeClass gives the pod the installation's default runtime class when the template
// names none. A template that sets runtimeClassName: "" asks for the node's default runtime:
// the empty name (which the API refuses on a pod) is dropped.
func (b Builder) applyRuntimeClass(spec *corev1.PodSpec) {
	if spec.RuntimeClassName != nil && *spec.RuntimeClassName == "" {
		spec.RuntimeClassName = nil
		return
	}
	if rc := b.runtimeClassFor(spec); rc != nil {
		spec.RuntimeClassName = rc
	}
}

func (b Builder) runtimeClassFor(spec *corev1.PodSpec) *string {
	if b.RuntimeClassName == "" || spec.RuntimeClassName != nil {
		return nil
	}
	return ptr.To(b.RuntimeClassName)
}

// harden gives a template's pod the Pod Security "restricted" settings it does not choose
// itself: the RuntimeDefault seccomp profile, no root user, and in every container no privilege
// escalation and no capabilities. Each is a default: a field the template sets is kept, and a
// template that runs something as root (runAsUser: 0, or a privileged container) is not made
// non-root, as the kubelet would refuse to start it.
func harden(spec *corev1.PodSpec) {
	if spec.OS != nil && spec.OS.Name == corev1.Windows {
		return // the API refuses these Linux settings on Windows pods
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	pod := spec.SecurityContext
	if pod.SeccompProfile == nil {
		pod.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	if pod.RunAsNonRoot == nil && !asksForRoot(spec) {
		pod.RunAsNonRoot = ptr.To(true)
	}
	for i := range spec.InitContainers {
		hardenContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		hardenContainer(&spec.Containers[i])
	}
}

// asksForRoot tells whether the template runs a container as root on purpose.
func asksForRoot(spec *corev1.PodSpec) bool {
	if u := spec.SecurityContext.RunAsUser; u != nil && *u == 0 {
		return true
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot != nil {
			continue
		}
		if ptr.Deref(sc.Privileged, false) || (sc.RunAsUser != nil && *sc.RunAsUser == 0) {
			return true
		}
	}
	return false
}

func hardenContainer(c *corev1.Container) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	sc := c.SecurityContext
	if ptr.Deref(sc.Privileged, false) {
		return // the template's explicit choice; the API refuses privileged without escalation
	}
	if sc.AllowPrivilegeEscalation == nil && !addsSysAdmin(sc.Capabilities) {
		sc.AllowPrivilegeEscalation = ptr.To(false)
	}
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	}
}

// addsSysAdmin: the API refuses allowPrivilegeEscalation: false next to CAP_SYS_ADMIN.
func addsSysAdmin(caps *corev1.Capabilities) bool {
	if caps == nil {
		return false
	}
	return slices.Contains(caps.Add, "SYS_ADMIN") || slices.Contains(caps.Add, "CAP_SYS_ADMIN")
}

// HardenPod applies, at the moment a Sandbox's pod is made, the same defaults as a template's
// pod gets: every Sandbox's pod is hardened, not only the ones built from a template, and a
// Sandbox edited after it was made gets them again. fromTemplate says the Sandbox was built by
// a Builder, which already chose its runtime class (nil there means the node's default runtime,
// asked for with runtimeClassName: ""); a raw Sandbox without one gets the installation's
// default, as a template's pod does.
func (b Builder) HardenPod(spec *corev1.PodSpec, fromTemplate bool) {
	harden(spec)
	if !fromTemplate {
		b.applyRuntimeClass(spec)
	}
}
