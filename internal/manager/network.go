package manager

import (
	"context"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/egresspolicy"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
)

// kubeDNSService is the conventional name of the cluster DNS Service.
const kubeDNSService = "kube-dns"

// networkPeers completes opts.Network for the Sandbox controller: the router exactly as the
// templates' policies name it, the defaults for DNS, and the DNS Service's addresses when none
// were given (a policy may see a Service address before it is translated to a DNS pod's).
func networkPeers(api client.Reader, opts Options, router sandboxtemplate.RouterPeer) egresspolicy.Peers {
	def := egresspolicy.DefaultPeers()
	p := opts.Network
	p.RouterNamespace, p.RouterPodLabels = router.Namespace, router.PodLabels
	if p.DNSNamespace == "" {
		p.DNSNamespace = def.DNSNamespace
	}
	if len(p.DNSPodLabels) == 0 {
		p.DNSPodLabels = def.DNSPodLabels
	}
	if len(p.DNSServiceIPs) == 0 {
		p.DNSServiceIPs = lookupDNSServiceIPs(api, p.DNSNamespace)
	}
	return p
}

// lookupDNSServiceIPs reads the kube-dns Service's cluster IPs once, directly from the API; a
// cluster without one (or a controller not allowed to read it) gets a policy naming the DNS
// pods alone.
func lookupDNSServiceIPs(api client.Reader, namespace string) []netip.Addr {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc := &corev1.Service{}
	log := ctrl.Log.WithName("setup")
	if err := api.Get(ctx, types.NamespacedName{Namespace: namespace, Name: kubeDNSService}, svc); err != nil {
		log.Info("no cluster DNS Service address for sandbox policies; they name the DNS pods alone",
			"service", namespace+"/"+kubeDNSService, "reason", err.Error())
		return nil
	}
	var ips []netip.Addr
	for _, s := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(ips, a) {
			ips = append(ips, a)
		}
	}
	return ips
}
