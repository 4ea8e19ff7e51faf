package egresspolicy

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var pod = map[string]string{agentsv1beta1.SandboxNameHashLabel: "0a1b2c3d", agentsv1beta1.SandboxNameLabel: "fp-1"}

// testPeers are a cluster with a DNS Service at 10.96.0.10 and a node-local cache opened.
func testPeers() Peers {
	p := DefaultPeers()
	p.DNSServiceIPs = []netip.Addr{netip.MustParseAddr("10.96.0.10")}
	p.AllowedLinkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.20.10/32")}
	return p
}

// policyYAML renders the policy spec the way docs/egress.md shows it.
func policyYAML(t *testing.T, pol Policy) string {
	t.Helper()
	out, err := yaml.Marshal(testPeers().PolicySpec(pod, pol))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestPolicySpecPerMode(t *testing.T) {
	const ingress = `ingress:
- from:
  - namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: agent-sandbox-system
    podSelector:
      matchLabels:
        app: sandbox-router
`
	const selector = `podSelector:
  matchLabels:
    agents.x-k8s.io/sandbox-name: fp-1
    agents.x-k8s.io/sandbox-name-hash: 0a1b2c3d
`
	const dns = `- ports:
  - port: 53
    protocol: UDP
  - port: 53
    protocol: TCP
  to:
  - namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: kube-system
    podSelector:
      matchLabels:
        k8s-app: kube-dns
  - ipBlock:
      cidr: 10.96.0.10/32
`
	both := "policyTypes:\n- Ingress\n- Egress\n"
	cases := []struct {
		name string
		pol  Policy
		want string
	}{
		{"no egress mode: ingress from the router alone, egress left to others", Policy{},
			ingress + selector + "policyTypes:\n- Ingress\n"},
		{"declared pods are admitted besides the router", Policy{IngressFrom: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ax"}}},
			ingress + "- from:\n  - podSelector:\n      matchLabels:\n        app: ax\n" + selector + "policyTypes:\n- Ingress\n"},
		{"allow-all: every pod and address but link-local, the opened prefix excepted", Policy{Egress: &egress.Spec{Mode: egress.AllowAll}},
			"egress:\n- to:\n  - namespaceSelector: {}\n  - ipBlock:\n      cidr: 0.0.0.0/0\n      except:\n      - 169.254.0.0/16\n" +
				"  - ipBlock:\n      cidr: ::/0\n      except:\n      - fe80::/10\n  - ipBlock:\n      cidr: 169.254.20.10/32\n" +
				ingress + selector + both},
		{"deny-all isolates egress with no rule, DNS included", Policy{Egress: &egress.Spec{Mode: egress.DenyAll}}, ingress + selector + both},
		{"restricted allows the CIDRs on every port, then DNS to the cluster DNS only",
			Policy{Egress: &egress.Spec{Mode: egress.Restricted, CIDRs: []string{"10.0.0.0/8", "2001:db8::/32"}}},
			"egress:\n- to:\n  - ipBlock:\n      cidr: 10.0.0.0/8\n  - ipBlock:\n      cidr: 2001:db8::/32\n" + dns + ingress + selector + both},
		{"restricted never opens link-local inside a wide CIDR", Policy{Egress: &egress.Spec{Mode: egress.Restricted, CIDRs: []string{"128.0.0.0/1"}}},
			"egress:\n- to:\n  - ipBlock:\n      cidr: 128.0.0.0/1\n      except:\n      - 169.254.0.0/16\n" + dns + ingress + selector + both},
		{"restricted without CIDRs allows DNS only, never an empty 'to'", Policy{Egress: &egress.Spec{Mode: egress.Restricted}},
			"egress:\n" + dns + ingress + selector + both},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := policyYAML(t, tc.pol); got != tc.want {
				t.Errorf("policy:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestPolicySpecSelectsExactlyTheGivenLabelsAndOwnsThem(t *testing.T) {
	labels := map[string]string{"a": "1"}
	peers := DefaultPeers()
	ps := peers.PolicySpec(labels, Policy{Egress: &egress.Spec{Mode: egress.DenyAll}})
	labels["a"] = "2"
	peers.RouterPodLabels["app"] = "changed"
	if ps.PodSelector.MatchLabels["a"] != "1" || len(ps.PodSelector.MatchLabels) != 1 {
		t.Errorf("selector %v follows the caller's map, want a copy of {a: 1}", ps.PodSelector.MatchLabels)
	}
	if got := ps.Ingress[0].From[0].PodSelector.MatchLabels["app"]; got != "sandbox-router" {
		t.Errorf("router selector follows the peers' map (app=%s), want a copy", got)
	}
}

func TestRestrictedRulesNeverAllowEverything(t *testing.T) {
	for _, s := range []egress.Spec{{Mode: egress.Restricted}, {Mode: egress.Restricted, CIDRs: []string{"192.0.2.1/32"}}} {
		ps := DefaultPeers().PolicySpec(pod, Policy{Egress: &s})
		for i, r := range ps.Egress {
			if len(r.To) == 0 {
				t.Errorf("%s: rule %d allows every destination", s.Summary(), i)
			}
		}
	}
}

func TestCheckLinkLocal(t *testing.T) {
	cases := []struct {
		name    string
		cidrs   []string
		wantErr string
	}{
		{"public and private ranges pass", []string{"10.0.0.0/8", "198.51.100.7/32"}, ""},
		{"a range holding link-local passes (the policy carves it out)", []string{"0.0.0.0/0", "::/0"}, ""},
		{"the cloud metadata server is refused", []string{"169.254.169.254/32"}, "egress CIDR 169.254.169.254/32 is link-local"},
		{"the whole IPv4 link-local range is refused", []string{"169.254.0.0/16"}, "egress CIDR 169.254.0.0/16 is link-local"},
		{"IPv6 link-local is refused", []string{"fe80::1/128"}, "egress CIDR fe80::1/128 is link-local"},
		{"the prefix an admin opened passes", []string{"169.254.20.10/32"}, ""},
		{"wider than the opened prefix is refused", []string{"169.254.20.0/24"}, "egress CIDR 169.254.20.0/24 is link-local"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := testPeers().CheckLinkLocal(egress.Spec{Mode: egress.Restricted, CIDRs: tc.cidrs})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("CheckLinkLocal(%v) = %v, want %q", tc.cidrs, err, tc.wantErr)
			}
		})
	}
}

func TestParseIngressFrom(t *testing.T) {
	cases := []struct {
		name    string
		value   *string
		want    *metav1.LabelSelector
		wantErr string
	}{
		{"absent: router only", nil, nil, ""},
		{"a label pair", ptrTo("app=ax"), &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ax"}}, ""},
		{"empty is refused", ptrTo(" "), nil, "is empty"},
		{"a set-based selector", ptrTo("tier in (agent,worker)"), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"agent", "worker"}}}}, ""},
		{"garbage is refused", ptrTo("tier in (agent"), nil, "is not a label selector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			if tc.value != nil {
				ann[agentsv1beta1.IngressFromPodsAnnotation] = *tc.value
			}
			got, err := ParseIngressFrom(ann)
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("ParseIngressFrom(%v) error = %v, want %q", ann, err, tc.wantErr)
			}
			if tc.wantErr == "" && err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseIngressFrom(%v) = %v, want %v", ann, got, tc.want)
			}
		})
	}
}

func ptrTo(s string) *string { return &s }

func TestPolicySpecSurvivesJSON(t *testing.T) {
	// The controller compares the cached policy with the desired spec; a spec that reads back
	// differently from JSON would be rewritten on every reconcile.
	for _, s := range []egress.Spec{{Mode: egress.AllowAll}, {Mode: egress.DenyAll}, {Mode: egress.Restricted, CIDRs: []string{"0.0.0.0/0"}}} {
		ps := testPeers().PolicySpec(pod, Policy{Egress: &s, IngressFrom: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}})
		data, err := json.Marshal(ps)
		if err != nil {
			t.Fatal(err)
		}
		var back networkingv1.NetworkPolicySpec
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, ps) {
			t.Errorf("%s: spec after JSON = %+v, want %+v", s.Summary(), back, ps)
		}
	}
}
