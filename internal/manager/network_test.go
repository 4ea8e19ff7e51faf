package manager

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
)

func kubeDNS(ns string, ips ...string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubeDNSService}}
	if len(ips) > 0 {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ips[0], ips
	}
	return svc
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// The Sandbox policies name the router exactly as the templates' policies do, the cluster DNS
// pods, and the DNS Service's addresses (a policy may see the Service address before it is
// translated), looked up once unless the admin named them.
func TestNetworkPeers(t *testing.T) {
	router := sandboxtemplate.RouterPeer{Namespace: "gw", PodLabels: map[string]string{"role": "gateway"}}
	def := egresspolicy.DefaultPeers()
	tests := []struct {
		name        string
		network     egresspolicy.Peers
		objs        []client.Object
		wantDNSNS   string
		wantIPs     []netip.Addr
		wantLookups int
	}{
		{name: "defaults: kube-dns in kube-system, its addresses once each",
			objs:      []client.Object{kubeDNS("kube-system", "10.96.0.10", "10.96.0.10", "fd00::a")},
			wantDNSNS: "kube-system", wantIPs: addrs("10.96.0.10", "fd00::a"), wantLookups: 1},
		{name: "no kube-dns Service: the DNS pods alone",
			wantDNSNS: "kube-system", wantLookups: 1},
		{name: "a headless kube-dns has no address to name",
			objs:      []client.Object{kubeDNS("kube-system", "None")},
			wantDNSNS: "kube-system", wantLookups: 1},
		{name: "looked up in the DNS namespace the admin named",
			network:   egresspolicy.Peers{DNSNamespace: "dns"},
			objs:      []client.Object{kubeDNS("kube-system", "10.96.0.10"), kubeDNS("dns", "10.100.0.53")},
			wantDNSNS: "dns", wantIPs: addrs("10.100.0.53"), wantLookups: 1},
		{name: "addresses the admin named are not looked up",
			network:   egresspolicy.Peers{DNSServiceIPs: addrs("10.0.0.53")},
			objs:      []client.Object{kubeDNS("kube-system", "10.96.0.10")},
			wantDNSNS: "kube-system", wantIPs: addrs("10.0.0.53")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookups := 0
			api := interceptor.NewClient(newFakeClient(tt.objs...), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, o ...client.GetOption) error {
					lookups++
					return c.Get(ctx, key, obj, o...)
				},
			})
			got := networkPeers(api, Options{Network: tt.network}, router)
			want := egresspolicy.Peers{RouterNamespace: "gw", RouterPodLabels: router.PodLabels,
				DNSNamespace: tt.wantDNSNS, DNSPodLabels: def.DNSPodLabels, DNSServiceIPs: tt.wantIPs}
			if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("peers (-want +got):\n%s", d)
			}
			if lookups != tt.wantLookups {
				t.Errorf("%d reads of the kube-dns Service, want %d", lookups, tt.wantLookups)
			}
		})
	}
}

// newFakeClient is a fake API holding objs, on a plain tracker: the default one parses the
// OpenAPI of every client-go type per client, most of this package's test time under -race.
func newFakeClient(objs ...client.Object) client.WithWatch {
	s := clientgoscheme.Scheme
	tracker := clienttesting.NewObjectTracker(s, serializer.NewCodecFactory(s).UniversalDecoder())
	return fake.NewClientBuilder().WithScheme(s).WithObjectTracker(tracker).WithObjects(objs...).Build()
}
