package sdk

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

func TestEgressValues(t *testing.T) {
	cases := []struct {
		name      string
		e         Egress
		wantMode  string
		wantCIDRs []string
		wantErr   string
	}{
		{"deny-all", EgressDenyAll, "deny-all", nil, ""},
		{"allow-all", EgressAllowAll, "allow-all", nil, ""},
		{"restricted canonicalises", EgressRestricted("10.0.0.0/8", "1.2.3.4", "2001:DB8::/32"), "restricted",
			[]string{"10.0.0.0/8", "1.2.3.4/32", "2001:db8::/32"}, ""},
		{"restricted without CIDRs is DNS only", EgressRestricted(), "restricted", nil, ""},
		{"a bad CIDR is an error", EgressRestricted("10.0.0.1/8"), "", nil, `egress CIDR "10.0.0.1/8" has host bits set; the network is 10.0.0.0/8`},
		{"the zero value is an error", Egress{}, "", nil, "egress mode is empty"},
		{"restricted to names", EgressRestrictedTo([]string{"10.0.0.0/8"}, []string{"pypi.org"}, false), "restricted", []string{"10.0.0.0/8"}, ""},
		{"a bad name is an error", EgressRestrictedTo(nil, []string{"*"}, false), "", nil, `egress domain "*" would allow every name`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.e.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || tc.e.Mode() != tc.wantMode || !reflect.DeepEqual(tc.e.CIDRs(), tc.wantCIDRs) {
				t.Errorf("= %q %q, %v; want %q %q", tc.e.Mode(), tc.e.CIDRs(), err, tc.wantMode, tc.wantCIDRs)
			}
		})
	}
}

func TestParseEgress(t *testing.T) {
	cases := []struct {
		mode    string
		cidrs   []string
		want    string
		wantErr string
	}{
		{"deny-all", nil, "deny-all", ""},
		{"restricted", []string{"192.0.2.0/24"}, "restricted to 192.0.2.0/24", ""},
		{"deny-all", []string{"192.0.2.0/24"}, "", "egress deny-all takes no CIDRs"},
		{"closed", nil, "", `unknown egress mode "closed"`},
	}
	for _, tc := range cases {
		e, err := ParseEgress(tc.mode, tc.cidrs...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseEgress(%q, %q) = %v, want error %q", tc.mode, tc.cidrs, err, tc.wantErr)
			}
			continue
		}
		if err != nil || e.String() != tc.want {
			t.Errorf("ParseEgress(%q, %q) = %q, %v; want %q", tc.mode, tc.cidrs, e, err, tc.want)
		}
	}
}

func TestEgressPatchClearsWhatTheModeDoesNotUse(t *testing.T) {
	const noDomains = `"agents.x-k8s.io/egress-domains":null,"agents.x-k8s.io/egress-domains-fail-open":null`
	cases := []struct {
		e    Egress
		want string
	}{
		{EgressDenyAll, `{"metadata":{"annotations":{"agents.x-k8s.io/egress":"deny-all","agents.x-k8s.io/egress-cidrs":null,` + noDomains + `}}}`},
		{EgressRestricted(), `{"metadata":{"annotations":{"agents.x-k8s.io/egress":"restricted","agents.x-k8s.io/egress-cidrs":null,` + noDomains + `}}}`},
		{EgressRestricted("10.0.0.0/8", "1.2.3.4/32"), `{"metadata":{"annotations":{"agents.x-k8s.io/egress":"restricted","agents.x-k8s.io/egress-cidrs":"10.0.0.0/8,1.2.3.4/32",` + noDomains + `}}}`},
		{EgressRestrictedTo(nil, []string{"PyPI.org", "*.github.com"}, true), `{"metadata":{"annotations":{"agents.x-k8s.io/egress":"restricted","agents.x-k8s.io/egress-cidrs":null,` +
			`"agents.x-k8s.io/egress-domains":"pypi.org,*.github.com","agents.x-k8s.io/egress-domains-fail-open":"true"}}}`},
	}
	for _, tc := range cases {
		data, err := egressPatch(tc.e).Data(nil)
		if err != nil || string(data) != tc.want {
			t.Errorf("%s: patch %s, %v; want %s", tc.e, data, err, tc.want)
		}
	}
}

func TestSandboxReadinessWaitsForTheEgressMode(t *testing.T) {
	readyWith := func(ann map[string]string, egressCond *metav1.Condition) *agentsv1alpha1.Sandbox {
		sb := testwrap.MakeSandbox("", "sb").Annotations(ann).ReadyWith("10.0.0.1")
		if egressCond != nil {
			egressCond.Type = agentsv1alpha1.SandboxConditionEgressPolicy
			sb.Condition(*egressCond)
		}
		return sb.Obj()
	}
	deny := map[string]string{agentsv1alpha1.EgressAnnotation: "deny-all"}
	names := map[string]string{agentsv1alpha1.EgressAnnotation: "restricted", agentsv1alpha1.EgressDomainsAnnotation: "pypi.org"}
	namesOpen := map[string]string{agentsv1alpha1.EgressAnnotation: "restricted", agentsv1alpha1.EgressDomainsAnnotation: "pypi.org",
		agentsv1alpha1.EgressDomainsFailOpenAnnotation: "true"}
	applied := func(msg string) *metav1.Condition {
		return &metav1.Condition{Status: metav1.ConditionTrue, Reason: agentsv1alpha1.ReasonEgressApplied, Message: msg}
	}
	cases := []struct {
		name                 string
		sb                   *agentsv1alpha1.Sandbox
		wantReady, wantFinal bool
		wantReason           string
	}{
		{"no egress asked: ready", readyWith(nil, nil), true, false, agentsv1alpha1.ReasonReady},
		{"asked and in force: ready", readyWith(deny, applied("deny-all: NetworkPolicy sb allows no egress, DNS included")), true, false, agentsv1alpha1.ReasonReady},
		{"asked, not reported yet: waiting", readyWith(deny, nil), false, false, reasonWaitingForEgress},
		{"another mode still in force: waiting", readyWith(deny, applied("allow-all: no egress NetworkPolicy")), false, false, reasonWaitingForEgress},
		{"someone else's policy: waiting", readyWith(deny, &metav1.Condition{Status: metav1.ConditionFalse, Reason: agentsv1alpha1.ReasonEgressPolicyConflict}),
			false, false, agentsv1alpha1.ReasonEgressPolicyConflict},
		{"invalid annotations on a running sandbox: final", readyWith(map[string]string{agentsv1alpha1.EgressAnnotation: "open"}, nil),
			false, true, agentsv1alpha1.ReasonInvalidEgress},
		{"names the cluster cannot enforce: final", readyWith(names, &metav1.Condition{Status: metav1.ConditionFalse,
			Reason: agentsv1alpha1.ReasonEgressDomainsUnenforceable}), false, true, agentsv1alpha1.ReasonEgressDomainsUnenforceable},
		{"names failing open, as asked: ready", readyWith(namesOpen, &metav1.Condition{Status: metav1.ConditionTrue,
			Reason: agentsv1alpha1.ReasonEgressDomainsFailOpen, Message: "restricted to pypi.org (fail-open): this cluster cannot enforce"}),
			true, false, agentsv1alpha1.ReasonReady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := sandboxReadiness(tc.sb)
			if r.ready != tc.wantReady || r.final != tc.wantFinal || r.reason != tc.wantReason {
				t.Errorf("readiness = ready %v final %v %s (%s); want ready %v final %v %s",
					r.ready, r.final, r.reason, r.message, tc.wantReady, tc.wantFinal, tc.wantReason)
			}
		})
	}
	notReady := testwrap.MakeSandbox("", "sb").Condition(metav1.Condition{
		Type: agentsv1alpha1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1alpha1.ReasonInvalidEgress}).Obj()
	if r := sandboxReadiness(notReady); !r.final {
		t.Error("Ready=False/InvalidEgress is not final; waiting cannot fix it")
	}
	noEngine := testwrap.MakeSandbox("", "sb").Condition(metav1.Condition{
		Type: agentsv1alpha1.SandboxConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1alpha1.ReasonEgressDomainsUnenforceable}).Obj()
	if r := sandboxReadiness(noEngine); !r.final {
		t.Error("Ready=False/EgressDomainsUnenforceable is not final; waiting cannot fix it")
	}
}

func TestClaimsRefuseEgress(t *testing.T) {
	c, err := New(Options{RESTConfig: offlineConfig, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(testCtx(t), "tmpl", WithEgress(EgressDenyAll)); err == nil || !strings.Contains(err.Error(), "a claim's sandbox follows its template's networkPolicy") {
		t.Errorf("Create with egress: %v", err)
	}
	if _, err := c.GetOrCreate(testCtx(t), "x", "tmpl", WithEgress(EgressDenyAll)); err == nil || !strings.Contains(err.Error(), "egress modes apply to Sandboxes created without a claim") {
		t.Errorf("GetOrCreate with egress: %v", err)
	}
}

func TestRawSandboxEgress(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	sdktest.StartController(t, c.KubeClient(), c.Namespace())

	// A bad CIDR fails before anything is written.
	if _, err := c.CreateSandbox(ctx, testwrap.MakeSandbox("", "bad").Image("runtime").Obj(), WithEgress(EgressRestricted("10.0.0.0/33"))); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33" is not a valid CIDR`) {
		t.Fatalf("CreateSandbox with a bad CIDR: %v", err)
	}
	if err := env.Client.Get(ctx, key(c, "bad"), &agentsv1alpha1.Sandbox{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Sandbox was created from a bad CIDR: %v", err)
	}

	spec := testwrap.MakeSandbox("", "fp-net").Image("runtime").
		Annotation(agentsv1alpha1.EgressCIDRsAnnotation, "192.0.2.0/24").Obj() // replaced by the option
	sb, err := c.CreateSandbox(ctx, spec, WithEgress(EgressRestricted("203.0.113.0/24", "198.51.100.7")))
	if err != nil {
		t.Fatal(err)
	}
	wantAnnotations(t, sb.Object(), "restricted", "203.0.113.0/24,198.51.100.7/32")

	if err := sb.SetEgress(ctx, EgressDenyAll); err != nil {
		t.Fatal(err)
	}
	wantAnnotations(t, sb.Object(), "deny-all", "")
	if err := c.SetEgress(ctx, "fp-net", EgressRestricted()); err != nil {
		t.Fatal(err)
	}
	if err := sb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	wantAnnotations(t, sb.Object(), "restricted", "")

	// Finding the Sandbox again with another mode writes that mode to it.
	again, err := c.GetOrCreateSandbox(ctx, testwrap.MakeSandbox("", "fp-net").Image("runtime").Obj(), WithEgress(EgressDenyAll), WithReadyTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wantAnnotations(t, again.Object(), "deny-all", "")
	if err := sb.SetEgress(ctx, EgressRestricted("300.0.0.0/8")); err == nil {
		t.Error("SetEgress took a bad CIDR")
	}
}

func TestSetEgressOnAClaimIsRefused(t *testing.T) {
	c, err := New(Options{RESTConfig: offlineConfig, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.claimHandle(testwrap.MakeClaim("default", "conv").Template("tmpl").Obj())
	if err := h.SetEgress(testCtx(t), EgressDenyAll); !errors.Is(err, errEgressOnClaim) {
		t.Errorf("SetEgress on a claim = %v, want errEgressOnClaim", err)
	}
}

func wantAnnotations(t *testing.T, sb *agentsv1alpha1.Sandbox, mode, cidrs string) {
	t.Helper()
	gotCIDRs, hasCIDRs := sb.Annotations[agentsv1alpha1.EgressCIDRsAnnotation]
	if sb.Annotations[agentsv1alpha1.EgressAnnotation] != mode || gotCIDRs != cidrs || (cidrs == "" && hasCIDRs) {
		t.Errorf("annotations %v, want egress %q and cidrs %q", sb.Annotations, mode, cidrs)
	}
}
