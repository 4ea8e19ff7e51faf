// Package hostnet holds the steps that change the host outside the state dir: the paths and
// cgroups the components create, iptables chains and nft tables, sysctls, the network
// namespace dir, the pod bridge, bpffs and libcni's cache. Each records the host as it was
// before changing it, and its Down restores that record and removes only what was added.
package hostnet

import (
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// Env is what the steps work on: the host, and where they keep their records.
type Env struct {
	Host  host.Host
	Store step.Store
}

// load reads a step's record; ok is false when there is none.
func load[T any](e Env, name string) (rec T, ok bool, err error) {
	ok, err = e.Store.Load(name, &rec)
	return rec, ok, err
}

// finish removes a step's record once Down undid everything (err == nil), else keeps it so
// that another Down can finish the job.
func finish(e Env, name string, err error) error {
	if err != nil {
		return err
	}
	return e.Store.Remove(name)
}
