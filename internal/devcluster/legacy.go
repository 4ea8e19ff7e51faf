package devcluster

import (
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/components"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostnet"
)

// migrateHostRecord takes over the host.json of a cluster an older `up` started.
func migrateHostRecord(c *components.Cluster) error {
	return hostnet.ImportLegacy(hostnet.Env{Host: c.Host, Store: c.Store}, c.Path("host.json"), c.Dir, c.LegacyRecords())
}
