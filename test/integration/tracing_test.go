package integration

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

// A claim's start joins the trace its client put in the annotation: the client's span →
// ReconcileSandboxClaim → AcquireSandbox, and → SandboxClaimReady under the pass that bound the
// Sandbox.
func TestAClaimsStartJoinsItsClientsTrace(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(1).Obj())
	testwrap.Eventually(t, "pool ready", poolReady(t, ns, "pool", 1))

	const clientSpan = "00f067aa0ba902b7"
	cases := []struct {
		name        string
		claim       *testwrap.ClaimWrapper
		traceID     string // the client's; "" for a claim without the annotation
		annotation  string
		wantLaunch  string
		wantPool    string
		wantSandbox func(claim string) bool
	}{
		{name: "warm, from upstream's Python client", claim: testwrap.MakeClaim(ns, "warm").Template("tpl"),
			traceID:    "4bf92f3577b34da6a3ce929d0e0e4736",
			annotation: `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-` + clientSpan + `-01"}`,
			wantLaunch: extv1alpha1.LaunchTypeWarm, wantPool: "pool", wantSandbox: func(c string) bool { return c != "warm" }},
		{name: "cold, from upstream's Go client", claim: testwrap.MakeClaim(ns, "cold").Template("tpl").WarmPool(string(extv1alpha1.WarmPoolPolicyNone)),
			traceID:    "5bf92f3577b34da6a3ce929d0e0e4736",
			annotation: `{"traceparent":"00-5bf92f3577b34da6a3ce929d0e0e4736-` + clientSpan + `-01"}`,
			wantLaunch: extv1alpha1.LaunchTypeCold, wantSandbox: func(c string) bool { return c == "cold" }},
		{name: "cold, no annotation: a trace of its own", claim: testwrap.MakeClaim(ns, "untraced").Template("tpl").WarmPool(string(extv1alpha1.WarmPoolPolicyNone)),
			wantLaunch: extv1alpha1.LaunchTypeCold, wantSandbox: func(c string) bool { return c == "untraced" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := tc.claim
			if tc.annotation != "" {
				claim = claim.Annotation(tracing.TraceContextAnnotation, tc.annotation)
			}
			name := claim.Obj().Name
			mustCreateObj(t, claim.Obj())
			testwrap.Eventually(t, name+" Ready", claimReadyIs(t, ns, name, metav1.ConditionTrue, agentsv1alpha1.ReasonReady))
			sandbox := getClaim(t, ns, name).Status.SandboxStatus.Name

			var ready, acquire, binding sdktrace.ReadOnlySpan
			testwrap.Eventually(t, "the claim's spans", func() error {
				var err error
				if ready, err = oneSpan(ns, name, "SandboxClaimReady"); err != nil {
					return err
				}
				if acquire, err = oneSpan(ns, name, "AcquireSandbox"); err != nil {
					return err
				}
				if binding = spanByID(acquire.Parent().SpanID().String()); binding == nil || binding.Name() != "ReconcileSandboxClaim" {
					return fmt.Errorf("AcquireSandbox's parent %s is no ended ReconcileSandboxClaim span", acquire.Parent().SpanID())
				}
				return nil
			})
			if got := ready.Parent().SpanID(); got != binding.SpanContext().SpanID() {
				t.Errorf("SandboxClaimReady's parent = %s, want the pass that bound the Sandbox (%s)", got, binding.SpanContext().SpanID())
			}
			trace := binding.SpanContext().TraceID().String()
			if tc.traceID != "" {
				if trace != tc.traceID || binding.Parent().SpanID().String() != clientSpan {
					t.Errorf("the binding pass is in trace %s under %s, want the client's trace %s under its span %s",
						trace, binding.Parent().SpanID(), tc.traceID, clientSpan)
				}
			} else if binding.Parent().IsValid() {
				t.Errorf("the binding pass of an unannotated claim has parent %s, want a root span", binding.Parent().SpanID())
			}
			for _, s := range []sdktrace.ReadOnlySpan{acquire, ready} {
				if got := s.SpanContext().TraceID().String(); got != trace {
					t.Errorf("%s is in trace %s, want %s", s.Name(), got, trace)
				}
			}
			attrs := attribute.NewSet(ready.Attributes()...)
			launch, _ := attrs.Value(tracing.AttrLaunchType)
			pool, _ := attrs.Value(tracing.AttrWarmPool)
			tmpl, _ := attrs.Value(tracing.AttrTemplate)
			sb, _ := attrs.Value(tracing.AttrSandboxName)
			if launch.AsString() != tc.wantLaunch || pool.AsString() != tc.wantPool || tmpl.AsString() != "tpl" ||
				sb.AsString() != sandbox || !tc.wantSandbox(sb.AsString()) {
				t.Errorf("Ready span: launch %q pool %q template %q sandbox %q; want %q %q %q and the claim's Sandbox %q",
					launch.AsString(), pool.AsString(), tmpl.AsString(), sb.AsString(), tc.wantLaunch, tc.wantPool, "tpl", sandbox)
			}
			if ready.EndTime().Before(ready.StartTime()) {
				t.Errorf("Ready span ends (%v) before it starts (%v)", ready.EndTime(), ready.StartTime())
			}
		})
	}
}

// oneSpan is the one ended span of the claim ns/name called spanName.
func oneSpan(ns, name, spanName string) (sdktrace.ReadOnlySpan, error) {
	var found []sdktrace.ReadOnlySpan
	for _, s := range claimSpans.Ended() {
		attrs := attribute.NewSet(s.Attributes()...)
		gotNS, _ := attrs.Value(tracing.AttrClaimNamespace)
		gotName, _ := attrs.Value(tracing.AttrClaimName)
		if s.Name() == spanName && gotNS.AsString() == ns && gotName.AsString() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d %s spans of claim %s/%s, want 1", len(found), spanName, ns, name)
	}
	return found[0], nil
}

func spanByID(id string) sdktrace.ReadOnlySpan {
	for _, s := range claimSpans.Ended() {
		if s.SpanContext().SpanID().String() == id {
			return s
		}
	}
	return nil
}
