package fqdnpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

var kubeDNS = DNS{Namespace: "kube-system", PodLabels: map[string]string{"k8s-app": "kube-dns"}}

// The policy of a list: the pod's lookups go to the cluster DNS through the proxy, and the names
// (exact as matchName, one-label wildcards as matchPattern) are open on every port; nothing else.
func TestSpecOpensTheNamesAndDNSThroughTheProxy(t *testing.T) {
	got, err := yaml.Marshal(Spec(map[string]string{"agents.x-k8s.io/sandbox-name-hash": "a6378518"},
		[]string{"allowed.test", "*.allowed.test"}, kubeDNS))
	if err != nil {
		t.Fatal(err)
	}
	want := `egress:
- toEndpoints:
  - matchLabels:
      k8s:io.kubernetes.pod.namespace: kube-system
      k8s:k8s-app: kube-dns
  toPorts:
  - ports:
    - port: "53"
      protocol: ANY
    rules:
      dns:
      - matchPattern: '*'
- toFQDNs:
  - matchName: allowed.test
  - matchPattern: '*.allowed.test'
endpointSelector:
  matchLabels:
    agents.x-k8s.io/sandbox-name-hash: a6378518
`
	if d := cmp.Diff(want, string(got)); d != "" {
		t.Errorf("spec (-want +got):\n%s", d)
	}
}

// A datapath that sees a lookup before the Service's translation must send it to the proxy too:
// the Service's addresses get the same DNS rule.
func TestSpecSendsLookupsToTheServiceAddressThroughTheProxy(t *testing.T) {
	dns := kubeDNS
	dns.ServiceIPs = []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::a")}
	got, _ := yaml.Marshal(Spec(nil, []string{"a.test"}, dns))
	want := `- toCIDR:
  - 10.96.0.10/32
  - fd00::a/128
  toPorts:
  - ports:
    - port: "53"
      protocol: ANY
    rules:
      dns:
      - matchPattern: '*'
`
	if !strings.Contains(string(got), want) {
		t.Errorf("spec:\n%s\nwant a rule:\n%s", got, want)
	}
}

// No names never becomes a rule without a destination, which Cilium reads as every one.
func TestSpecWithoutNamesHasNoOpenRule(t *testing.T) {
	s := Spec(nil, nil, kubeDNS)
	for _, r := range s["egress"].([]any) {
		rule := r.(map[string]any)
		if rule["toEndpoints"] == nil && rule["toCIDR"] == nil && rule["toFQDNs"] == nil {
			t.Errorf("a rule without a destination: %v", rule)
		}
	}
}

// What the API server gives back (JSON) compares equal to what was written: no rewrite loop.
func TestSameSpecAfterARoundTripThroughJSON(t *testing.T) {
	desired := Spec(map[string]string{"a": "b"}, []string{"x.test", "*.y.test"}, kubeDNS)
	stored := New("ns", "p", nil, desired)
	data, err := stored.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back := Empty()
	if err := back.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	if !SameSpec(back, desired) {
		t.Error("the stored spec reads as different from the one written")
	}
	if SameSpec(back, Spec(map[string]string{"a": "b"}, []string{"x.test"}, kubeDNS)) {
		t.Error("a spec with a name fewer reads as the same")
	}
}

func TestEngineResolution(t *testing.T) {
	withCNP := []*metav1.APIResourceList{{GroupVersion: "cilium.io/v2", APIResources: []metav1.APIResource{
		{Name: "ciliumendpoints"}, {Name: Resource, Namespaced: true, Kind: "CiliumNetworkPolicy"},
	}}}
	onlyOther := []*metav1.APIResourceList{{GroupVersion: "cilium.io/v2", APIResources: []metav1.APIResource{{Name: "ciliumendpoints"}}}}
	tests := []struct {
		name      string
		engine    Engine
		resources []*metav1.APIResourceList
		failWith  error
		want      bool
		wantErr   string
	}{
		{"auto with Cilium", EngineAuto, withCNP, nil, true, ""},
		{"auto without the group", EngineAuto, nil, nil, false, ""},
		{"auto with the group but not the kind", EngineAuto, onlyOther, nil, false, ""},
		{"cilium with Cilium", EngineCilium, withCNP, nil, true, ""},
		{"cilium without it refuses to start", EngineCilium, nil, nil, false, "serves no cilium.io/v2 CiliumNetworkPolicy"},
		{"none never asks", EngineNone, withCNP, errors.New("must not be asked"), false, ""},
		{"discovery fails", EngineAuto, nil, errors.New("connection refused"), false, "asking the API for cilium.io/v2: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tt.resources}}
			if tt.failWith != nil {
				dc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tt.failWith })
			}
			got, err := Resolve(tt.engine, dc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Resolve = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestParseEngine(t *testing.T) {
	for _, s := range []string{"auto", "cilium", "none"} {
		if e, err := ParseEngine(s); err != nil || string(e) != s {
			t.Errorf("ParseEngine(%q) = %q, %v", s, e, err)
		}
	}
	if _, err := ParseEngine("calico"); err == nil || !strings.Contains(err.Error(), "want auto, cilium or none") {
		t.Errorf("ParseEngine(calico) = %v, want a refusal naming the choices", err)
	}
}
