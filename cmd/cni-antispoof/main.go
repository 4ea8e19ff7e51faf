// Command cni-antispoof is the local cluster's anti-spoofing CNI plugin
// (agent-sandbox-antispoof), chained after the bridge plugin: see internal/devcluster/antispoof
// and docs/dev-cluster.md.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/antispoof"
)

func main() {
	skel.PluginMainFuncs(antispoof.Funcs(), antispoof.Versions, "agent-sandbox anti-spoofing CNI plugin")
}
