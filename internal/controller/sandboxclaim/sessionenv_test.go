package sandboxclaim

import (
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// templateRunningSandboxd is a template of podSpec whose annotation names container (none when "").
func templateRunningSandboxd(container string) *extv1alpha1.SandboxTemplate {
	tmpl := &extv1alpha1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	tmpl.Spec.PodTemplate.Spec = *podSpec()
	if container != "" {
		tmpl.Annotations = map[string]string{extv1alpha1.SandboxdContainerAnnotation: container}
	}
	return tmpl
}

func TestSessionEnvTakesTheWarmPathOnlyWhereSandboxdStartsTheProcesses(t *testing.T) {
	cases := []struct {
		name     string
		sandboxd string
		env      []extv1alpha1.EnvVar
		wantEnv  map[string]string
		wantCold string // part of the reason to start cold
	}{
		{"no env: nothing to carry", "runtime", nil, nil, ""},
		{"the first container runs sandboxd", "runtime",
			[]extv1alpha1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2", ContainerName: "runtime"}}, map[string]string{"A": "1", "B": "2"}, ""},
		{"the template declares no sandboxd", "", []extv1alpha1.EnvVar{{Name: "A", Value: "1"}}, nil, "declares no sandboxd container"},
		{"the annotation names a missing container", "nope", []extv1alpha1.EnvVar{{Name: "A", Value: "1"}}, nil, `names container "nope"`},
		{"env for the sidecar", "runtime", []extv1alpha1.EnvVar{{Name: "A", Value: "1", ContainerName: "sidecar"}}, nil,
			`env A targets container "sidecar", and sandboxd runs in "runtime"`},
		{"default container while sandboxd runs in the sidecar", "sidecar", []extv1alpha1.EnvVar{{Name: "A", Value: "1"}}, nil,
			`env A targets container "runtime"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, why := sessionEnv(templateRunningSandboxd(tc.sandboxd), tc.env)
			if !maps.Equal(env, tc.wantEnv) || (tc.wantCold == "") != (why == "") || !strings.Contains(why, tc.wantCold) {
				t.Fatalf("sessionEnv = %v, %q; want %v, a reason containing %q", env, why, tc.wantEnv, tc.wantCold)
			}
		})
	}
}

func TestTheClaimsReadyMessageSaysItsEnvWentWarm(t *testing.T) {
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "pool-x"}}
	sb.Status.PodIPs = []string{"10.0.0.1"}
	sb.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.SandboxConditionReady, Status: metav1.ConditionTrue,
		Reason: agentsv1alpha1.ReasonReady, Message: "Pod is Ready"}}
	if err := setSessionEnv(sb, map[string]string{"A": "1", "B": "2"}); err != nil {
		t.Fatal(err)
	}
	claim := &extv1alpha1.SandboxClaim{}
	mirrorSandbox(claim, sb)
	want := "Pod is Ready; warm, with the claim's env (2 variables), which sandboxd gives every process it starts"
	if got := claim.Status.Conditions[0].Message; got != want {
		t.Fatalf("Ready message %q; want %q", got, want)
	}
}
