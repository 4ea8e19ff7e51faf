package blueprint

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

var (
	runtimeDefault = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	dropAll        = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	// restricted is what a container gets when the template says nothing.
	restricted = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: dropAll}
)

func TestNewSandboxHardensThePod(t *testing.T) {
	root := ptr.To(int64(0))
	cases := []struct {
		name          string
		tmpl          *testwrap.TemplateWrapper
		wantPod       *corev1.PodSecurityContext
		wantContainer *corev1.SecurityContext
	}{
		{"a template that says nothing gets the restricted profile",
			testwrap.MakeTemplate("ns", "t"),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault, RunAsNonRoot: ptr.To(true)}, restricted},
		{"the template's seccomp profile is kept",
			testwrap.MakeTemplate("ns", "t").PodSecurity(&corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}),
			&corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}, RunAsNonRoot: ptr.To(true)}, restricted},
		{"the template's runAsNonRoot: false is kept",
			testwrap.MakeTemplate("ns", "t").PodSecurity(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false)}),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault, RunAsNonRoot: ptr.To(false)}, restricted},
		{"a pod that runs as uid 0 is not made non-root",
			testwrap.MakeTemplate("ns", "t").PodSecurity(&corev1.PodSecurityContext{RunAsUser: root}),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault, RunAsUser: root}, restricted},
		{"a container that runs as uid 0 keeps the pod from being made non-root",
			testwrap.MakeTemplate("ns", "t").ContainerSecurity(&corev1.SecurityContext{RunAsUser: root}),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault},
			&corev1.SecurityContext{RunAsUser: root, AllowPrivilegeEscalation: ptr.To(false), Capabilities: dropAll}},
		{"a privileged container is left as written and the pod is not made non-root",
			testwrap.MakeTemplate("ns", "t").ContainerSecurity(&corev1.SecurityContext{Privileged: ptr.To(true)}),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault},
			&corev1.SecurityContext{Privileged: ptr.To(true)}},
		{"the container's own capabilities are kept",
			testwrap.MakeTemplate("ns", "t").ContainerSecurity(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault, RunAsNonRoot: ptr.To(true)},
			&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}},
		{"CAP_SYS_ADMIN keeps privilege escalation unset (the API refuses both)",
			testwrap.MakeTemplate("ns", "t").ContainerSecurity(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault, RunAsNonRoot: ptr.To(true)},
			&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}},
		{"the container's allowPrivilegeEscalation: true is kept",
			testwrap.MakeTemplate("ns", "t").ContainerSecurity(&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}),
			&corev1.PodSecurityContext{SeccompProfile: runtimeDefault, RunAsNonRoot: ptr.To(true)},
			&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true), Capabilities: dropAll}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := plain.NewSandbox(tc.tmpl.Hub()).Spec.PodTemplate.Spec
			if d := cmp.Diff(tc.wantPod, spec.SecurityContext); d != "" {
				t.Errorf("pod securityContext (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantContainer, spec.Containers[0].SecurityContext); d != "" {
				t.Errorf("container securityContext (-want +got):\n%s", d)
			}
		})
	}
}

func TestNewSandboxHardensInitContainers(t *testing.T) {
	tmpl := testwrap.MakeTemplate("ns", "t").InitContainers(corev1.Container{Name: "setup", Image: "busybox"}).Hub()
	got := plain.NewSandbox(tmpl).Spec.PodTemplate.Spec.InitContainers[0].SecurityContext
	if d := cmp.Diff(restricted, got); d != "" {
		t.Errorf("init container securityContext (-want +got):\n%s", d)
	}
}

func TestNewSandboxLeavesWindowsPodsAlone(t *testing.T) {
	tmpl := testwrap.MakeTemplate("ns", "t").Hub()
	tmpl.Spec.PodTemplate.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	spec := plain.NewSandbox(tmpl).Spec.PodTemplate.Spec
	if spec.SecurityContext != nil || spec.Containers[0].SecurityContext != nil {
		t.Errorf("Windows pod got securityContext %+v / %+v, want none (the API refuses Linux settings there)",
			spec.SecurityContext, spec.Containers[0].SecurityContext)
	}
}

func TestNewSandboxGivesTheDefaultRuntimeClass(t *testing.T) {
	cases := []struct {
		name     string
		builder  Builder
		template *string
		want     *string
	}{
		{"a template without one gets the default", Builder{RuntimeClassName: "gvisor"}, nil, ptr.To("gvisor")},
		{"the template's own runtime class is kept", Builder{RuntimeClassName: "gvisor"}, ptr.To("kata"), ptr.To("kata")},
		{"an empty name asks for the node's default runtime", Builder{RuntimeClassName: "gvisor"}, ptr.To(""), nil},
		{"no default leaves the pod on the node's default runtime", plain, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := testwrap.MakeTemplate("ns", "t").RuntimeClass(tc.template).Hub()
			got := tc.builder.NewSandbox(tmpl).Spec.PodTemplate.Spec.RuntimeClassName
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("runtimeClassName (-want +got):\n%s", d)
			}
		})
	}
}

// Warm Sandboxes made before the default runtime class changed must be replaced, not handed
// out on the old runtime; a template that names its own class is not affected.
func TestHashFollowsTheDefaultRuntimeClass(t *testing.T) {
	gvisor := Builder{RuntimeClassName: "gvisor"}
	own := testwrap.MakeTemplate("ns", "t").RuntimeClass(ptr.To("kata")).Hub()
	cases := []struct {
		name      string
		a, b      string
		wantEqual bool
	}{
		{"a template without one: default on and off differ",
			gvisor.Hash(testwrap.MakeTemplate("ns", "t").Hub()), plain.Hash(testwrap.MakeTemplate("ns", "t").Hub()), false},
		{"a template without one: two defaults differ",
			gvisor.Hash(testwrap.MakeTemplate("ns", "t").Hub()), Builder{RuntimeClassName: "kata"}.Hash(testwrap.MakeTemplate("ns", "t").Hub()), false},
		{"a template with its own class: the default does not matter", gvisor.Hash(own), plain.Hash(own), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.a == tc.b) != tc.wantEqual {
				t.Errorf("hashes %s and %s: equal=%v, want %v", tc.a, tc.b, tc.a == tc.b, tc.wantEqual)
			}
		})
	}
}
