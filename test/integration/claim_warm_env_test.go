package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// sandboxdTemplate is a template whose container "runtime" runs sandboxd, so claims with env for
// it can be served warm; it sets PRESET, and a sidecar runs beside it.
func sandboxdTemplate(ns, name string, policy extv1alpha1.EnvVarsInjectionPolicy) *testwrap.TemplateWrapper {
	sidecar := corev1.Container{Name: "sidecar", Image: testwrap.RuntimeImage, Command: []string{"sleep", "infinity"}}
	return testwrap.MakeTemplate(ns, name).EnvInjection(policy).
		Containers(testwrap.RuntimeContainer(), sidecar).Env("PRESET", "template").
		Annotation(extv1alpha1.SandboxdContainerAnnotation, "runtime")
}

// A claim's env on a template that runs sandboxd is served from the warm pool: the env rides on
// the adopted Sandbox's session-env annotation, under the same policy and with the same answers
// as on the cold path. Where sandboxd cannot deliver it, the claim starts cold and says why.
func TestWarmClaimsCarryTheirEnvUnderTheTemplatesPolicy(t *testing.T) {
	env := func(vars ...string) []extv1alpha1.EnvVar {
		var out []extv1alpha1.EnvVar
		for i := 0; i+1 < len(vars); i += 2 {
			out = append(out, extv1alpha1.EnvVar{Name: vars[i], Value: vars[i+1]})
		}
		return out
	}
	cases := []struct {
		name     string
		policy   extv1alpha1.EnvVarsInjectionPolicy
		noDaemon bool // the template declares no sandboxd container
		env      []extv1alpha1.EnvVar
		// Exactly one of the three outcomes.
		wantWarm   map[string]string // the session env of the adopted member
		wantCold   string            // what the SandboxProvisioned event says about why
		wantReason string            // Ready reason of a refused claim
	}{
		{name: "Allowed adds variables, warm", policy: extv1alpha1.EnvVarsInjectionPolicyAllowed,
			env: env("API_KEY", "k-1", "USER_ID", "42", "TASK", "t 7"), wantWarm: map[string]string{"API_KEY": "k-1", "USER_ID": "42", "TASK": "t 7"}},
		{name: "Allowed never overrides the template's, warm or not", policy: extv1alpha1.EnvVarsInjectionPolicyAllowed,
			env: env("PRESET", "claim"), wantReason: extv1alpha1.ReasonEnvVarsInjectionRejected},
		{name: "Overrides replaces the template's, warm", policy: extv1alpha1.EnvVarsInjectionPolicyOverrides,
			env: env("PRESET", "claim"), wantWarm: map[string]string{"PRESET": "claim"}},
		{name: "Disallowed refuses any env", policy: extv1alpha1.EnvVarsInjectionPolicyDisallowed,
			env: env("API_KEY", "k-1"), wantReason: extv1alpha1.ReasonEnvVarsInjectionRejected},
		{name: "containerName of the sandboxd container, warm", policy: extv1alpha1.EnvVarsInjectionPolicyAllowed,
			env:      []extv1alpha1.EnvVar{{Name: "API_KEY", Value: "k-1", ContainerName: "runtime"}},
			wantWarm: map[string]string{"API_KEY": "k-1"}},
		{name: "env for the sidecar, which sandboxd does not start: cold", policy: extv1alpha1.EnvVarsInjectionPolicyAllowed,
			env:      []extv1alpha1.EnvVar{{Name: "API_KEY", Value: "k-1", ContainerName: "sidecar"}},
			wantCold: `env API_KEY targets container "sidecar", and sandboxd runs in "runtime"`},
		{name: "a template that declares no sandboxd container: cold", policy: extv1alpha1.EnvVarsInjectionPolicyAllowed, noDaemon: true,
			env: env("API_KEY", "k-1"), wantCold: "declares no sandboxd container (annotation " + extv1alpha1.SandboxdContainerAnnotation + ")"},
	}
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, pool, claimName := fmt.Sprintf("tpl-%d", i), fmt.Sprintf("pool-%d", i), fmt.Sprintf("claim-%d", i)
			template := sandboxdTemplate(ns, tmpl, tc.policy)
			if tc.noDaemon {
				template = testwrap.MakeTemplate(ns, tmpl).EnvInjection(tc.policy)
			}
			mustCreateObj(t, template.Obj(), testwrap.MakeWarmPool(ns, pool).Template(tmpl).Replicas(1).Obj())
			testwrap.Eventually(t, "pool ready", poolReady(t, ns, pool, 1))
			mustCreateObj(t, testwrap.MakeClaim(ns, claimName).Template(tmpl).EnvVars(tc.env...).Obj())

			if tc.wantReason != "" {
				testwrap.Eventually(t, "refused", claimReadyIs(t, ns, claimName, metav1.ConditionFalse, tc.wantReason))
				for _, sb := range sandboxesIn(t, ns) {
					if metav1.GetControllerOf(&sb) != nil && metav1.GetControllerOf(&sb).Name == claimName {
						t.Errorf("a refused claim took Sandbox %s", sb.Name)
					}
				}
				return
			}
			testwrap.Eventually(t, "claim Ready", claimReadyIs(t, ns, claimName, metav1.ConditionTrue, ""))
			claim := getClaim(t, ns, claimName)
			sb := getSandbox(t, ns, claim.Status.SandboxStatus.Name)
			raw, hasEnv := sb.Annotations[agentsv1alpha1.SessionEnvAnnotation]
			if tc.wantCold != "" {
				if sb.Name != claimName || sb.Labels[extv1alpha1.LaunchTypeLabel] != extv1alpha1.LaunchTypeCold || hasEnv {
					t.Fatalf("Sandbox %s launch-type %q session env %q; want a cold Sandbox named %s with the env in its pod spec",
						sb.Name, sb.Labels[extv1alpha1.LaunchTypeLabel], raw, claimName)
				}
				testwrap.Eventually(t, "the event says why it started cold", eventNames(ns, "SandboxClaim", claimName,
					corev1.EventTypeNormal, extv1alpha1.EventSandboxProvisioned, "(cold: ", tc.wantCold))
				return
			}
			var got map[string]string
			if sb.Name == claimName || sb.Labels[extv1alpha1.LaunchTypeLabel] != extv1alpha1.LaunchTypeWarm || json.Unmarshal([]byte(raw), &got) != nil ||
				!maps.Equal(got, tc.wantWarm) {
				t.Fatalf("Sandbox %s launch-type %q session env %q; want a pool member taken warm with session env %v",
					sb.Name, sb.Labels[extv1alpha1.LaunchTypeLabel], raw, tc.wantWarm)
			}
			for _, c := range sb.Spec.PodTemplate.Spec.Containers {
				for _, e := range c.Env {
					if _, claimed := tc.wantWarm[e.Name]; claimed && e.Value != "template" {
						t.Errorf("the warm Sandbox's pod spec took the claim's %s=%s; it must stay as the pool made it", e.Name, e.Value)
					}
				}
			}
			ready := meta.FindStatusCondition(claim.Status.Conditions, extv1alpha1.ClaimConditionReady)
			if want := fmt.Sprintf("warm, with the claim's env (%d variables)", len(tc.wantWarm)); !strings.Contains(ready.Message, want) {
				t.Errorf("claim Ready message %q; want it to say %q", ready.Message, want)
			}
		})
	}
}

// The env rides in the adoption's own patch: a warm claim with env costs the controller what a
// warm claim without env does.
func TestAWarmClaimWithEnvCostsNoExtraWrite(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, sandboxdTemplate(ns, "tpl", extv1alpha1.EnvVarsInjectionPolicyAllowed).Obj(),
		testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(2).Obj())
	writes := map[string]int{}
	for _, claim := range []*testwrap.ClaimWrapper{
		testwrap.MakeClaim(ns, "plain").Template("tpl"),
		testwrap.MakeClaim(ns, "with-env").Template("tpl").Env("API_KEY", "k-1").Env("USER_ID", "42").Env("TASK", "t-7"),
	} {
		testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 2))
		name := claim.Obj().Name
		mark := controllerWrites.mark()
		mustCreateObj(t, claim.Obj())
		testwrap.Eventually(t, name+" Ready", claimReadyIs(t, ns, name, metav1.ConditionTrue, ""))
		sbName := getClaim(t, ns, name).Status.SandboxStatus.Name
		if sbName == name {
			t.Fatalf("claim %s started cold; want a warm start", name)
		}
		testwrap.Eventually(t, "the pod relabelled", func() error {
			p := podOf(ns, sbName)
			if err := exists(p, true)(); err != nil {
				return err
			}
			if _, still := p.Labels[extv1alpha1.WarmPoolLabel]; still {
				return fmt.Errorf("pod labels = %v", p.Labels)
			}
			return nil
		})
		for _, w := range controllerWrites.since(mark, ns) {
			if containsAny(w.path, "/sandboxclaims/"+name, "/sandboxes/"+sbName, "/pods/"+sbName, "/services/"+sbName) {
				writes[name]++
			}
		}
	}
	t.Logf("controller writes per warm claim: without env %d, with 3 env vars %d", writes["plain"], writes["with-env"])
	if writes["with-env"] != writes["plain"] {
		t.Errorf("a warm claim with env cost %d controller writes, one without %d; want the same", writes["with-env"], writes["plain"])
	}
}
