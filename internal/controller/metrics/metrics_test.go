package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	tw "github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCreationEstimate(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		firstSeen time.Time
		want      time.Time
	}{
		{"first sight within the creation second sharpens it", created.Add(300 * time.Millisecond), created.Add(300 * time.Millisecond)},
		{"first sight seconds later: the end of the creation second", created.Add(5 * time.Second), created.Add(time.Second)},
		{"first sight unknown: the creation timestamp", time.Time{}, created},
		{"first sight before creation (clock skew): the creation timestamp", created.Add(-time.Second), created},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := creationEstimate(created, tc.firstSeen); !got.Equal(tc.want) {
				t.Errorf("creationEstimate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRecordFirstReady(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 2, 0, time.UTC)
	base := FirstReady{LaunchType: LaunchWarm, Now: now, ClaimCreated: now.Add(-2 * time.Second),
		FirstSeen: now.Add(-1500 * time.Millisecond), SandboxNamespace: "ns",
		SandboxCreated: now.Add(-time.Minute), SandboxReady: now.Add(-50 * time.Second)}
	tests := []struct {
		name   string
		edit   func(*FirstReady)
		series map[prometheus.Collector]int // series count each histogram gains for the template
	}{
		{"without the client annotation there is no client latency", func(*FirstReady) {},
			map[prometheus.Collector]int{claimStartup: 1, claimControllerStartup: 1, clientClaimStartup: 0, sandboxCreation: 1}},
		{"the client annotation adds the client latency", func(f *FirstReady) {
			f.ClientRequestedAt = now.Add(-3 * time.Second).Format(time.RFC3339Nano)
		}, map[prometheus.Collector]int{claimStartup: 1, claimControllerStartup: 1, clientClaimStartup: 1, sandboxCreation: 1}},
		{"a client time in the future (skew) is dropped", func(f *FirstReady) {
			f.ClientRequestedAt = now.Add(time.Hour).Format(time.RFC3339Nano)
		}, map[prometheus.Collector]int{claimStartup: 1, claimControllerStartup: 1, clientClaimStartup: 0, sandboxCreation: 1}},
		{"an unparsable client time is dropped", func(f *FirstReady) { f.ClientRequestedAt = "yesterday" },
			map[prometheus.Collector]int{claimStartup: 1, claimControllerStartup: 1, clientClaimStartup: 0, sandboxCreation: 1}},
		{"no first sight (claim bound before a restart): no controller latency", func(f *FirstReady) { f.FirstSeen = time.Time{} },
			map[prometheus.Collector]int{claimStartup: 1, claimControllerStartup: 0, clientClaimStartup: 0, sandboxCreation: 1}},
		{"a Sandbox without a Ready time: no creation latency", func(f *FirstReady) { f.SandboxReady = time.Time{} },
			map[prometheus.Collector]int{claimStartup: 1, claimControllerStartup: 1, clientClaimStartup: 0, sandboxCreation: 0}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			f.Template = "tmpl-first-ready-" + string(rune('a'+i)) // a template of its own: series start empty
			tc.edit(&f)
			RecordFirstReady(f)
			for c, want := range tc.series {
				if got := seriesWithLabel(t, c, "sandbox_template", f.Template); got != want {
					t.Errorf("%s: %d series for the template, want %d", describe(c), got, want)
				}
			}
		})
	}
}

func TestRecordFirstReadyMilliseconds(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 2, 0, time.UTC)
	RecordFirstReady(FirstReady{LaunchType: LaunchCold, Template: "tmpl-ms", Now: now,
		ClaimCreated: now.Add(-2 * time.Second), FirstSeen: now.Add(-1750 * time.Millisecond)})
	if got := sumOf(t, claimControllerStartup, "tmpl-ms"); got != 1750 {
		t.Errorf("controller startup latency sum = %v ms, want 1750", got)
	}
	// Created at :00 (whole seconds), first seen at :00.25: the claim is 1750 ms old, not 2000.
	if got := sumOf(t, claimStartup, "tmpl-ms"); got != 1750 {
		t.Errorf("claim startup latency sum = %v ms, want 1750", got)
	}
}

func TestRecordLaunch(t *testing.T) {
	tests := []struct {
		name      string
		launch    Launch
		wantLabel map[string]string
	}{
		{"a warm, ready Sandbox from a pool, by the Go client",
			Launch{Namespace: "ns", Template: "t-launch-1", Type: LaunchWarm, WarmPool: "pool", SandboxReady: true, CreatedBy: "go-client"},
			map[string]string{"launch_type": "warm", "warmpool_name": "pool", "pod_condition": "ready", "created_by": "go-client"}},
		{"a cold Sandbox is not ready when handed over; an unknown client reads unknown",
			Launch{Namespace: "ns", Template: "t-launch-2", Type: LaunchCold, CreatedBy: "my-script"},
			map[string]string{"launch_type": "cold", "warmpool_name": "", "pod_condition": "not_ready", "created_by": "unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			RecordLaunch(tc.launch)
			labels := map[string]string{"namespace": tc.launch.Namespace, "sandbox_template": tc.launch.Template}
			for k, v := range tc.wantLabel {
				labels[k] = v
			}
			if got := testutil.ToFloat64(claimCreation.With(labels)); got != 1 {
				t.Errorf("agent_sandbox_claim_creation_total%v = %v, want 1", labels, got)
			}
		})
	}
}

func TestSandboxLabels(t *testing.T) {
	claim := tw.MakeClaim("ns", "c").Hub()
	pool := tw.MakeWarmPool("ns", "p").Hub()
	claimKind := extv1beta1.GroupVersion.WithKind("SandboxClaim")
	poolKind := extv1beta1.GroupVersion.WithKind("SandboxWarmPool")
	expired := metav1.Condition{Type: agentsv1beta1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonExpired}
	tests := []struct {
		name string
		sb   *agentsv1beta1.Sandbox
		want [7]string
	}{
		{"a raw Sandbox, not ready", tw.MakeSandbox("ns", "raw").Hub(),
			[7]string{"ns", "false", "false", "cold", "unknown", "None", "unknown"}},
		{"a ready pool member counts as warm",
			tw.MakeSandbox("ns", "m").ReadyWith("10.0.0.1").ControlledBy(pool, poolKind).
				Annotation(extv1beta1.TemplateRefAnnotation, "t").Hub(),
			[7]string{"ns", "true", "false", "warm", "t", "SandboxWarmPool", "unknown"}},
		{"an adopted Sandbox of a Python client's claim",
			tw.MakeSandbox("ns", "a").ReadyWith("10.0.0.1").ControlledBy(claim, claimKind).
				Label(extv1beta1.LaunchTypeLabel, "warm").Label(CreatedByLabel, "python-client").
				Annotation(extv1beta1.TemplateRefAnnotation, "t").Hub(),
			[7]string{"ns", "true", "false", "warm", "t", "SandboxClaim", "python-client"}},
		{"an expired, retained cold Sandbox",
			tw.MakeSandbox("ns", "e").Condition(expired).ControlledBy(claim, claimKind).
				Label(extv1beta1.LaunchTypeLabel, "cold").Annotation(extv1beta1.TemplateRefAnnotation, "t").Hub(),
			[7]string{"ns", "false", "true", "cold", "t", "SandboxClaim", "unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sandboxLabels(tc.sb); got != tc.want {
				t.Errorf("sandboxLabels = %v, want %v (namespace, ready_condition, expired, launch_type, sandbox_template, owned_by, created_by)", got, tc.want)
			}
		})
	}
}

func TestSandboxCollectorReportsOnlyOnceElected(t *testing.T) {
	elected := make(chan struct{})
	c := NewSandboxCollector(refusingReader{t}, elected, logr.Discard())
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("a standby reported %d series, want none (the leader's would double every sum)", n)
	}
}

// refusingReader fails the test when read: nothing may be listed.
type refusingReader struct{ t *testing.T }

func (r refusingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	r.t.Error("the collector read a Sandbox before it was elected")
	return nil
}

func (r refusingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.t.Error("the collector listed before it was elected")
	return nil
}
