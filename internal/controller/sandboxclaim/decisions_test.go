package sandboxclaim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/logtest"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// reconcileLogged reconciles the claim with a logger at verbosity v in the context, as
// controller-runtime hands one to Reconcile, and returns what was logged.
func (g *rig) reconcileLogged(claim string, v int) *logtest.Recorder {
	g.t.Helper()
	logger, rec := logtest.New(v)
	ctx := log.IntoContext(context.Background(), logger)
	if _, err := g.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: claim}}); err != nil {
		g.t.Fatalf("Reconcile(%s): %v", claim, err)
	}
	return rec
}

// Each decision on a claim is one V(2) line naming the Sandbox it concerns.
func TestClaimDecisionsAreLoggedAtV2(t *testing.T) {
	tmpl := pythonTemplate().Hub()
	pool := warmPool("pool")
	cases := []struct {
		name  string
		objs  func() []*testwrap.SandboxWrapper
		claim *extv1beta1.SandboxClaim
		msg   string
		want  map[string]any // the values the line must carry (others may follow)
	}{
		{name: "a warm member adopted",
			objs: func() []*testwrap.SandboxWrapper {
				return []*testwrap.SandboxWrapper{warmMember(pool, tmpl, "m1", "10.0.0.1")}
			},
			claim: claimOf("c").Hub(), msg: "adopted a warm sandbox",
			want: map[string]any{"sandbox": logtest.Ref(ns, "m1"), "pool": logtest.Ref(ns, "pool"), "template": "python"}},
		{name: "a cold start, and why",
			claim: claimOf("c").WarmPool("none").Hub(), msg: "created a sandbox from the template (cold start)",
			want: map[string]any{"sandbox": logtest.Ref(ns, "c"), "template": "python", "why": "the claim's warmpool is none"}},
		{name: "expiry under Retain deletes the Sandbox",
			objs: func() []*testwrap.SandboxWrapper {
				return []*testwrap.SandboxWrapper{testwrap.MakeSandbox(ns, "c").UID("c-sb-uid").ControlledBy(claimOf("c").Hub(), claimGVK)}
			},
			claim: claimOf("c").ShutdownTime(testNow.Add(-time.Minute)).ReadyWith("c").Hub(),
			msg:   "deleting the expired claim's sandbox; the claim stays",
			want:  map[string]any{"sandbox": logtest.Ref(ns, "c"), "shutdownPolicy": "Retain"}},
		{name: "expiry under Delete deletes the claim",
			claim: claimOf("c").ShutdownTime(testNow.Add(-time.Minute)).ShutdownPolicy(extv1alpha1.ShutdownPolicyDelete).Hub(),
			msg:   "deleting the expired claim; its sandbox follows",
			want:  map[string]any{"shutdownPolicy": "Delete"}},
		{name: "a requeue at the coming expiry",
			claim: claimOf("c").WarmPool("none").ShutdownTime(testNow.Add(time.Hour)).Hub(),
			msg:   "requeue at the claim's expiry",
			want:  map[string]any{"at": testNow.Add(time.Hour).String()}},
		{name: "bad input reported, not returned",
			claim: claimOf("c").Template("missing").Hub(),
			msg:   "claim cannot be served as written",
			want:  map[string]any{"reason": extv1beta1.ReasonTemplateNotFound}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tmpl, pool, tc.claim}
			var members []*testwrap.SandboxWrapper
			if tc.objs != nil {
				members = tc.objs()
			}
			for _, m := range members {
				objs = append(objs, m.Hub())
			}
			g := newRig(t, objs...)
			for _, m := range members {
				g.offer(g.r, m.Hub())
			}
			if err := g.reconcileLogged("c", 2).Check(2, tc.msg, tc.want); err != nil {
				t.Error(err)
			}
		})
	}
}

// The claim's env values are its secrets (API keys handed to the agent): the decision logs name
// the variables, at every verbosity never their values, on the warm path (session env) and the
// cold one (pod spec).
func TestClaimEnvValuesAreNeverLogged(t *testing.T) {
	const secret = "sk-live-0123456789"
	tmpl := func(sandboxd string) *extv1beta1.SandboxTemplate {
		w := testwrap.MakeTemplate(ns, "python").UID(types.UID("python-env-decisions-uid-" + sandboxd)).
			Containers(testwrap.RuntimeContainer()).EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed)
		if sandboxd != "" {
			w.Annotation(extv1beta1.SandboxdContainerAnnotation, sandboxd)
		}
		return w.Hub()
	}
	cases := []struct {
		name    string
		tmpl    *extv1beta1.SandboxTemplate
		msg     string
		namesAt string // the key of the line listing the env's names
	}{
		{"warm: the env becomes the session env", tmpl("runtime"), "adopted a warm sandbox", "sessionEnv"},
		{"cold: the env goes into the pod spec", tmpl(""), "created a sandbox from the template (cold start)", "env"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := warmPool("pool")
			m1 := warmMember(pool, tc.tmpl, "m1", "10.0.0.1").Hub()
			m1.Spec.PodTemplate.Spec = *tc.tmpl.Spec.PodTemplate.Spec.DeepCopy()
			g := newRig(t, tc.tmpl, pool, m1, claimOf("c").Env("API_KEY", secret).Hub())
			g.offer(g.r, m1)
			rec := g.reconcileLogged("c", 10)
			line, ok := rec.Find(tc.msg)
			if !ok {
				t.Fatalf("no line %q; logged %q", tc.msg, rec.Messages())
			}
			if d := cmp.Diff([]any{"API_KEY"}, line.Values[tc.namesAt]); d != "" {
				t.Errorf("%q %s (-want +got): the env's names belong in the log\n%s", tc.msg, tc.namesAt, d)
			}
			if strings.Contains(rec.Text(), secret) {
				t.Fatalf("an env value reached the log:\n%s", rec.Text())
			}
		})
	}
}
