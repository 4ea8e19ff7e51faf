package sandboxclaim

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
)

// podSpec is a template's pod: a runtime container presetting PRESET, a sidecar, an init
// container.
func podSpec() *corev1.PodSpec {
	return &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "setup"}},
		Containers: []corev1.Container{
			{Name: "runtime", Env: []corev1.EnvVar{{Name: "PRESET", Value: "template"}}},
			{Name: "sidecar"},
		},
	}
}

// envOf returns name=value of every variable of every container, by container.
func envOf(spec *corev1.PodSpec) map[string][]string {
	out := map[string][]string{}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				out[c.Name] = append(out[c.Name], e.Name+"="+e.Value)
			}
		}
	}
	return out
}

func TestInjectEnv(t *testing.T) {
	cases := []struct {
		name       string
		policy     extv1beta1.EnvVarsInjectionPolicy
		env        []extv1beta1.EnvVar
		wantEnv    map[string][]string // when accepted
		wantReject string              // substring of the rejection
	}{
		{"no env is always fine, even Disallowed", extv1beta1.EnvVarsInjectionPolicyDisallowed, nil,
			map[string][]string{"runtime": {"PRESET=template"}}, ""},
		{"Disallowed rejects any env", extv1beta1.EnvVarsInjectionPolicyDisallowed, []extv1beta1.EnvVar{{Name: "NEW", Value: "1"}},
			nil, "envVarsInjectionPolicy is Disallowed"},
		{"an unset policy is Disallowed", "", []extv1beta1.EnvVar{{Name: "NEW", Value: "1"}},
			nil, "envVarsInjectionPolicy is Disallowed"},
		{"Allowed adds to the first container", extv1beta1.EnvVarsInjectionPolicyAllowed, []extv1beta1.EnvVar{{Name: "NEW", Value: "1"}},
			map[string][]string{"runtime": {"PRESET=template", "NEW=1"}}, ""},
		{"Allowed never overrides", extv1beta1.EnvVarsInjectionPolicyAllowed, []extv1beta1.EnvVar{{Name: "PRESET", Value: "claim"}},
			nil, `env PRESET is already set by the template on container "runtime"`},
		{"Overrides replaces in place", extv1beta1.EnvVarsInjectionPolicyOverrides, []extv1beta1.EnvVar{{Name: "PRESET", Value: "claim"}},
			map[string][]string{"runtime": {"PRESET=claim"}}, ""},
		{"a named container", extv1beta1.EnvVarsInjectionPolicyAllowed, []extv1beta1.EnvVar{{Name: "X", Value: "1", ContainerName: "sidecar"}},
			map[string][]string{"runtime": {"PRESET=template"}, "sidecar": {"X=1"}}, ""},
		{"an init container by name", extv1beta1.EnvVarsInjectionPolicyAllowed, []extv1beta1.EnvVar{{Name: "X", Value: "1", ContainerName: "setup"}},
			map[string][]string{"runtime": {"PRESET=template"}, "setup": {"X=1"}}, ""},
		{"a container the template does not have", extv1beta1.EnvVarsInjectionPolicyOverrides, []extv1beta1.EnvVar{{Name: "X", Value: "1", ContainerName: "nope"}},
			nil, `env X targets container "nope", which the template does not have`},
		{"variables apply in order", extv1beta1.EnvVarsInjectionPolicyOverrides,
			[]extv1beta1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}, {Name: "B", Value: "3"}},
			map[string][]string{"runtime": {"PRESET=template", "A=2", "B=3"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := injectEnv(podSpec(), tc.policy, tc.env)
			if tc.wantReject != "" {
				var ue *userError
				if !errors.As(err, &ue) || ue.reason != extv1beta1.ReasonEnvVarsInjectionRejected || !strings.Contains(ue.message, tc.wantReject) {
					t.Fatalf("err = %v, want an %s user error containing %q", err, extv1beta1.ReasonEnvVarsInjectionRejected, tc.wantReject)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want the env accepted", err)
			}
			if d := cmp.Diff(tc.wantEnv, envOf(got)); d != "" {
				t.Errorf("env by container (-want +got):\n%s", d)
			}
		})
	}
}

func TestInjectEnvIntoAPodWithoutContainers(t *testing.T) {
	_, err := injectEnv(&corev1.PodSpec{}, extv1beta1.EnvVarsInjectionPolicyAllowed, []extv1beta1.EnvVar{{Name: "X", Value: "1"}})
	var ue *userError
	if !errors.As(err, &ue) || ue.reason != extv1beta1.ReasonEnvVarsInjectionRejected {
		t.Fatalf("err = %v, want a rejection: there is no first container", err)
	}
}
