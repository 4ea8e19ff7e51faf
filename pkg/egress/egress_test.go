package egress

import (
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNew(t *testing.T) {
	cases := []struct {
		name    string
		mode    string
		cidrs   []string
		want    Spec
		wantErr string
	}{
		{"allow-all", AllowAll, nil, Spec{Mode: AllowAll}, ""},
		{"deny-all", DenyAll, nil, Spec{Mode: DenyAll}, ""},
		{"restricted without CIDRs", Restricted, nil, Spec{Mode: Restricted}, ""},
		{"restricted keeps order and drops duplicates", Restricted, []string{"10.0.0.0/8", "1.2.3.4/32", "10.0.0.0/8"},
			Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8", "1.2.3.4/32"}}, ""},
		{"a bare IPv4 address is one host", Restricted, []string{"1.2.3.4"}, Spec{Mode: Restricted, CIDRs: []string{"1.2.3.4/32"}}, ""},
		{"a bare IPv6 address is one host", Restricted, []string{"2001:db8::1"}, Spec{Mode: Restricted, CIDRs: []string{"2001:db8::1/128"}}, ""},
		{"IPv6 is written canonically", Restricted, []string{"2001:DB8:0:0::/32"}, Spec{Mode: Restricted, CIDRs: []string{"2001:db8::/32"}}, ""},
		{"spaces around a CIDR are trimmed", Restricted, []string{" 10.0.0.0/8 "}, Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8"}}, ""},
		{"unknown mode", "open", nil, Spec{}, `unknown egress mode "open"; want allow-all, deny-all or restricted`},
		{"modes are case-sensitive", "Deny-All", nil, Spec{}, `unknown egress mode "Deny-All"`},
		{"empty mode", "", nil, Spec{}, "egress mode is empty"},
		{"deny-all takes no CIDRs", DenyAll, []string{"10.0.0.0/8"}, Spec{}, "egress deny-all takes no CIDRs (got 10.0.0.0/8)"},
		{"allow-all takes no CIDRs", AllowAll, []string{"10.0.0.0/8"}, Spec{}, "egress allow-all takes no CIDRs"},
		{"host bits set", Restricted, []string{"10.0.0.1/8"}, Spec{}, `egress CIDR "10.0.0.1/8" has host bits set; the network is 10.0.0.0/8`},
		{"prefix too long", Restricted, []string{"10.0.0.0/33"}, Spec{}, `egress CIDR "10.0.0.0/33" is not a valid CIDR`},
		{"not an address", Restricted, []string{"example.com"}, Spec{}, `egress CIDR "example.com" is neither a CIDR`},
		{"leading zeros", Restricted, []string{"010.0.0.0/8"}, Spec{}, `egress CIDR "010.0.0.0/8" is not a valid CIDR`},
		{"IPv4-mapped IPv6", Restricted, []string{"::ffff:1.2.3.4"}, Spec{}, "write IPv4 addresses as IPv4 (1.2.3.4)"},
		{"zone", Restricted, []string{"fe80::1%eth0"}, Spec{}, "is neither a CIDR"},
		{"empty entry", Restricted, []string{""}, Spec{}, "empty egress CIDR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := New(tc.mode, tc.cidrs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New(%q, %q) = %v, %v; want error containing %q", tc.mode, tc.cidrs, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("New(%q, %q) = %+v, %v; want %+v", tc.mode, tc.cidrs, got, err, tc.want)
			}
		})
	}
}

func TestFromAnnotations(t *testing.T) {
	const mode, list = agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressCIDRsAnnotation
	cases := []struct {
		name          string
		annotations   map[string]string
		want          Spec
		wantRequested bool
		wantErr       string
	}{
		{"no annotations ask for nothing", map[string]string{"other": "x"}, Spec{}, false, ""},
		{"deny-all", map[string]string{mode: "deny-all"}, Spec{Mode: DenyAll}, true, ""},
		{"restricted with a comma list", map[string]string{mode: "restricted", list: "10.0.0.0/8,1.2.3.4/32"},
			Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8", "1.2.3.4/32"}}, true, ""},
		{"the list may use spaces, newlines and a trailing comma", map[string]string{mode: "restricted", list: "10.0.0.0/8, 1.2.3.4/32\n192.0.2.0/24,"},
			Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8", "1.2.3.4/32", "192.0.2.0/24"}}, true, ""},
		{"restricted with an empty list is DNS only", map[string]string{mode: "restricted", list: ""}, Spec{Mode: Restricted}, true, ""},
		{"a leftover list is ignored by deny-all", map[string]string{mode: "deny-all", list: "10.0.0.0/8"}, Spec{Mode: DenyAll}, true, ""},
		{"a leftover bad list is ignored by allow-all", map[string]string{mode: "allow-all", list: "nonsense"}, Spec{Mode: AllowAll}, true, ""},
		{"a bad mode names the mode annotation", map[string]string{mode: "none"}, Spec{}, true, `annotation agents.x-k8s.io/egress: unknown egress mode "none"`},
		{"an empty mode is invalid, not absent", map[string]string{mode: ""}, Spec{}, true, "annotation agents.x-k8s.io/egress: egress mode is empty"},
		{"a bad CIDR names the list annotation", map[string]string{mode: "restricted", list: "10.0.0.0/8,300.1.1.1/32"}, Spec{}, true,
			`annotation agents.x-k8s.io/egress-cidrs: egress CIDR "300.1.1.1/32" is not a valid CIDR`},
		{"a list without a mode is refused", map[string]string{list: "10.0.0.0/8"}, Spec{}, true,
			"annotation agents.x-k8s.io/egress-cidrs is set but agents.x-k8s.io/egress is not; add agents.x-k8s.io/egress: restricted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, requested, err := FromAnnotations(tc.annotations)
			if requested != tc.wantRequested {
				t.Errorf("requested = %v, want %v", requested, tc.wantRequested)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromAnnotations = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestAnnotationsRoundTrip(t *testing.T) {
	cases := []struct {
		spec Spec
		want map[string]string
	}{
		{Spec{Mode: DenyAll}, map[string]string{agentsv1alpha1.EgressAnnotation: "deny-all"}},
		{Spec{Mode: AllowAll}, map[string]string{agentsv1alpha1.EgressAnnotation: "allow-all"}},
		{Spec{Mode: Restricted}, map[string]string{agentsv1alpha1.EgressAnnotation: "restricted"}},
		{Spec{Mode: Restricted, CIDRs: []string{"10.0.0.0/8", "2001:db8::/32"}},
			map[string]string{agentsv1alpha1.EgressAnnotation: "restricted", agentsv1alpha1.EgressCIDRsAnnotation: "10.0.0.0/8,2001:db8::/32"}},
	}
	for _, tc := range cases {
		t.Run(tc.spec.Summary(), func(t *testing.T) {
			got := tc.spec.Annotations()
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Annotations = %v, want %v", got, tc.want)
			}
			back, requested, err := FromAnnotations(got)
			if err != nil || !requested || back.Summary() != tc.spec.Summary() {
				t.Errorf("FromAnnotations(Annotations) = %+v, %v, %v", back, requested, err)
			}
		})
	}
}

func TestAppliedMatchesOnlyItsOwnMessage(t *testing.T) {
	specs := []Spec{
		{Mode: AllowAll}, {Mode: DenyAll}, {Mode: Restricted},
		{Mode: Restricted, CIDRs: []string{"10.0.0.0/8"}},
		{Mode: Restricted, CIDRs: []string{"10.0.0.0/8", "1.2.3.4/32"}},
	}
	for i, a := range specs {
		msg := a.AppliedMessage("fp-1")
		for j, b := range specs {
			if got := b.Applied(msg); got != (i == j) {
				t.Errorf("%q.Applied(message of %q) = %v", b.Summary(), a.Summary(), got)
			}
		}
	}
}
