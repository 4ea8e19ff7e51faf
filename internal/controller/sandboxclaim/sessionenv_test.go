package sandboxclaim

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// templateRunningSandboxd is a template of podSpec whose annotation names container (none when "").
func templateRunningSandboxd(container string) *extv1beta1.SandboxTemplate {
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	tmpl.Spec.PodTemplate.Spec = *podSpec()
	if container != "" {
		tmpl.Annotations = map[string]string{extv1beta1.SandboxdContainerAnnotation: container}
	}
	return tmpl
}

func TestSessionEnvTakesTheWarmPathOnlyWhereSandboxdStartsTheProcesses(t *testing.T) {
	cases := []struct {
		name     string
		sandboxd string
		env      []extv1beta1.EnvVar
		wantEnv  map[string]string
		wantCold string // part of the reason to start cold
	}{
		{"no env: nothing to carry", "runtime", nil, nil, ""},
		{"the first container runs sandboxd", "runtime",
			[]extv1beta1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2", ContainerName: "runtime"}}, map[string]string{"A": "1", "B": "2"}, ""},
		{"the template declares no sandboxd", "", []extv1beta1.EnvVar{{Name: "A", Value: "1"}}, nil, "declares no sandboxd container"},
		{"the annotation names a missing container", "nope", []extv1beta1.EnvVar{{Name: "A", Value: "1"}}, nil, `names container "nope"`},
		{"env for the sidecar", "runtime", []extv1beta1.EnvVar{{Name: "A", Value: "1", ContainerName: "sidecar"}}, nil,
			`env A targets container "sidecar", and sandboxd runs in "runtime"`},
		{"default container while sandboxd runs in the sidecar", "sidecar", []extv1beta1.EnvVar{{Name: "A", Value: "1"}}, nil,
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
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "pool-x"}}
	sb.Status.PodIPs = []string{"10.0.0.1"}
	sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionTrue,
		Reason: agentsv1beta1.ReasonReady, Message: "Pod is Ready"}}
	if err := setSessionEnv(sb, map[string]string{"A": "1", "B": "2"}); err != nil {
		t.Fatal(err)
	}
	claim := &extv1beta1.SandboxClaim{}
	mirrorSandbox(claim, sb)
	want := "Pod is Ready; warm, with the claim's env (2 variables), which sandboxd gives every process it starts"
	if got := claim.Status.Conditions[0].Message; got != want {
		t.Fatalf("Ready message %q; want %q", got, want)
	}
}

// A claim's env reaches a warm Sandbox through the adoption's one patch when sandboxd runs in
// the container it targets; otherwise the claim starts cold with the env in its pod spec.
func TestReconcileCarriesTheClaimsEnv(t *testing.T) {
	tmpl := func(sandboxd string) *extv1beta1.SandboxTemplate {
		w := testwrap.MakeTemplate(ns, "python").UID(types.UID("python-env-uid-"+sandboxd)).
			Containers(testwrap.RuntimeContainer(), corev1.Container{Name: "sidecar", Image: "sidecar:1"}).
			EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed)
		if sandboxd != "" {
			w.Annotation(extv1beta1.SandboxdContainerAnnotation, sandboxd)
		}
		return w.Hub()
	}
	cases := []struct {
		name string
		tmpl *extv1beta1.SandboxTemplate
		env  []extv1beta1.EnvVar

		wantSandbox    string
		wantSessionEnv string            // the Sandbox's session-env annotation ("": none)
		wantPodEnv     map[string]string // container -> NAME=value added to the pod spec
		wantReadyMsg   string            // part of the claim's Ready message
		wantColdReason string            // part of the cold start's event
	}{
		{name: "sandboxd runs in the targeted container: warm, the env on the Sandbox",
			tmpl: tmpl("runtime"), env: []extv1beta1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2", ContainerName: "runtime"}},
			wantSandbox: "m1", wantSessionEnv: `{"A":"1","B":"2"}`,
			wantReadyMsg: "warm, with the claim's env (2 variables), which sandboxd gives every process it starts"},
		{name: "the env targets the sidecar: cold, the env in the pod spec",
			tmpl: tmpl("runtime"), env: []extv1beta1.EnvVar{{Name: "A", Value: "1", ContainerName: "sidecar"}},
			wantSandbox: "c", wantPodEnv: map[string]string{"sidecar": "A=1"},
			wantColdReason: `env A targets container "sidecar", and sandboxd runs in "runtime"`},
		{name: "the template declares no sandboxd: cold, the env in the pod spec",
			tmpl: tmpl(""), env: []extv1beta1.EnvVar{{Name: "A", Value: "1"}},
			wantSandbox: "c", wantPodEnv: map[string]string{"runtime": "A=1"},
			wantColdReason: "declares no sandboxd container"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := warmPool("pool")
			m1 := warmMember(pool, tc.tmpl, "m1", "10.0.0.1").Hub()
			m1.Spec.PodTemplate.Spec = *tc.tmpl.Spec.PodTemplate.Spec.DeepCopy()
			g := newRig(t, tc.tmpl, pool, m1, claimOf("c").EnvVars(alphaEnv(tc.env)...).Hub())
			g.offer(g.r, m1)
			g.mustReconcile("c")
			launch := extv1beta1.LaunchTypeCold
			if tc.wantSandbox == "m1" {
				launch = extv1beta1.LaunchTypeWarm
			}
			assertServedBy(t, g, "c", tc.wantSandbox, launch)
			sb := g.sandbox(tc.wantSandbox)
			if got := sb.Annotations[agentsv1beta1.SessionEnvAnnotation]; got != tc.wantSessionEnv {
				t.Errorf("session env annotation %q, want %q", got, tc.wantSessionEnv)
			}
			podEnv := map[string]string{}
			for _, c := range sb.Spec.PodTemplate.Spec.Containers {
				for _, e := range c.Env {
					podEnv[c.Name] = e.Name + "=" + e.Value
				}
			}
			if tc.wantPodEnv == nil {
				tc.wantPodEnv = map[string]string{}
			}
			if d := cmp.Diff(tc.wantPodEnv, podEnv); d != "" {
				t.Errorf("pod spec env (-want +got); a warm pod's spec never changes:\n%s", d)
			}
			ready := meta.FindStatusCondition(g.claim("c").Status.Conditions, extv1beta1.ClaimConditionReady)
			if tc.wantReadyMsg != "" && (ready == nil || !strings.Contains(ready.Message, tc.wantReadyMsg)) {
				t.Errorf("Ready condition %+v, want a message containing %q", ready, tc.wantReadyMsg)
			}
			events := strings.Join(g.emitted(), "\n")
			if tc.wantColdReason != "" && !strings.Contains(events, tc.wantColdReason) {
				t.Errorf("events %q, want the cold start's reason %q", events, tc.wantColdReason)
			}
		})
	}
}

// alphaEnv is env as the v1alpha1 claim wrapper takes it.
func alphaEnv(env []extv1beta1.EnvVar) []extv1alpha1.EnvVar {
	out := make([]extv1alpha1.EnvVar, len(env))
	for i, e := range env {
		out[i] = extv1alpha1.EnvVar(e)
	}
	return out
}
