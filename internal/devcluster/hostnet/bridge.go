package hostnet

import (
	"context"
	"fmt"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Bridge creates the pod bridge with the node's address before anything needs it: the kubelet
// registers BridgeIP as the node's InternalIP (it refuses loopback), serves on it, the API
// server listens there, and the host reaches every pod directly over it. Pods get a default
// route through it (isGateway) to reach ClusterIPs and this machine; nothing is masqueraded,
// and forwarding from the bridge out of the machine's uplink is dropped (Netfilter's guard).
// The Service range is routed to it. Down deletes it, its addresses and routes with it.
type Bridge struct{ Env }

type bridgeRecord struct {
	Link string `json:"link"`
}

func (Bridge) Name() string { return "bridge" }

func (s Bridge) Up(context.Context) error {
	// Recorded whether or not it exists already: the name is ours alone.
	if err := s.Store.Save(s.Name(), bridgeRecord{Link: spec.BridgeName}); err != nil {
		return err
	}
	if _, err := s.Host.Run("ip", "link", "show", spec.BridgeName); err != nil {
		if _, err := s.Host.Run("ip", "link", "add", spec.BridgeName, "type", "bridge"); err != nil {
			return err
		}
	}
	out, _ := s.Host.Run("ip", "-o", "addr", "show", "dev", spec.BridgeName)
	if !strings.Contains(out, " "+spec.BridgeCIDR+" ") {
		if _, err := s.Host.Run("ip", "addr", "add", spec.BridgeCIDR, "dev", spec.BridgeName); err != nil {
			return err
		}
	}
	if _, err := s.Host.Run("ip", "link", "set", spec.BridgeName, "up"); err != nil {
		return err
	}
	// Service addresses go to the bridge: host → ClusterIP never leaves by the default route
	// (kube-proxy rewrites it to a pod or to the API server on the bridge address).
	_, err := s.Host.Run("ip", "route", "replace", spec.ServiceCIDR, "dev", spec.BridgeName, "src", spec.BridgeIP)
	return err
}

func (s Bridge) Down(context.Context) error {
	rec, ok, err := load[bridgeRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	if _, err := s.Host.Run("ip", "link", "show", rec.Link); err == nil {
		if _, err := s.Host.Run("ip", "link", "delete", rec.Link); err != nil {
			return fmt.Errorf("pod bridge: %w", err)
		}
	}
	return finish(s.Env, s.Name(), nil)
}
