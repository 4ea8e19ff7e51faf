package fqdnpolicy

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// Engine says how the controller enforces domain allow-lists; the controller's
// --egress-domains-engine flag chooses it, and "auto" asks the API once at start.
type Engine string

const (
	// EngineAuto: Cilium when the API serves cilium.io/v2 CiliumNetworkPolicy, else none.
	EngineAuto Engine = "auto"
	// EngineCilium: CiliumNetworkPolicies; the controller does not start without their API.
	EngineCilium Engine = "cilium"
	// EngineNone: names are never enforced, for a cluster whose Cilium cannot (its DNS proxy
	// off, as with --enable-l7-proxy=false, which makes it refuse every policy with a DNS
	// rule): Sandboxes that list domains get no pod unless they fail open.
	EngineNone Engine = "none"
)

// ParseEngine reads the flag's value.
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(s); e {
	case EngineAuto, EngineCilium, EngineNone:
		return e, nil
	}
	return "", fmt.Errorf("egress domains engine %q: want %s, %s or %s", s, EngineAuto, EngineCilium, EngineNone)
}

// Resolve turns the configured engine into whether CiliumNetworkPolicies are written, asking
// discovery (once) for auto and cilium.
func Resolve(e Engine, dc discovery.DiscoveryInterface) (bool, error) {
	if e == EngineNone {
		return false, nil
	}
	served, err := Served(dc)
	switch {
	case err != nil:
		return false, err
	case e == EngineCilium && !served:
		return false, fmt.Errorf("egress domains engine %s: the API serves no %s %s (is Cilium installed?)", EngineCilium, GVK.GroupVersion(), GVK.Kind)
	}
	return served, nil
}

// Served reports whether the API serves cilium.io/v2 ciliumnetworkpolicies.
func Served(dc discovery.DiscoveryInterface) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(GVK.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API for %s: %w", GVK.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == Resource {
			return true, nil
		}
	}
	return false, nil
}
