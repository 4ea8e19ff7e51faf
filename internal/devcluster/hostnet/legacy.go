package hostnet

import (
	"encoding/json"
	"errors"
	"os"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// legacyRecord is host.json, the one record of the whole host an `up` before the steps wrote.
type legacyRecord struct {
	IPForward    string              `json:"ipForward"`
	CreatedPaths []string            `json:"createdPaths"`
	Netns        []string            `json:"netns"`
	Chains       map[string][]string `json:"chains"`
	Sysctls      map[string]string   `json:"sysctls"`
	NftTables    []string            `json:"nftTables"`
	BPFFSMounted bool                `json:"bpffsMounted,omitempty"`
	NetnsMounted bool                `json:"netnsMounted,omitempty"`
}

// ImportLegacy turns the host.json of a cluster an older `up` started into the steps' records
// (keeping a step's own record where it has one), plus the records of other packages' steps in
// extra, so that Down restores that host too, then removes it. Without host.json it does
// nothing.
func ImportLegacy(e Env, path, stateDir string, extra map[string]any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var old legacyRecord
	if err := json.Unmarshal(data, &old); err != nil {
		return err
	}
	if old.Sysctls == nil {
		old.Sysctls = map[string]string{}
	}
	if _, ok := old.Sysctls["net/ipv4/ip_forward"]; !ok && old.IPForward != "" {
		old.Sysctls["net/ipv4/ip_forward"] = old.IPForward
	}
	records := map[string]any{
		Paths{}.Name():     pathsRecord{Created: old.CreatedPaths},
		Netfilter{}.Name(): netfilterRecord{Chains: old.Chains, NftTables: old.NftTables},
		Sysctls{}.Name():   sysctlsRecord{Values: old.Sysctls},
		Netns{}.Name():     netnsRecord{Before: old.Netns, Mounted: old.NetnsMounted},
		Bridge{}.Name():    bridgeRecord{Link: spec.BridgeName},
		BPFFS{}.Name():     bpffsRecord{Mounted: old.BPFFSMounted},
		CNICache{}.Name():  cniCacheRecord{Network: spec.CNINetwork},
		StateDir{}.Name():  stateDirRecord{Dir: stateDir},
	}
	for name, rec := range extra {
		records[name] = rec
	}
	for name, rec := range records {
		// A record of the steps was made first (an older up ran on a cluster a newer one
		// started): it holds the host as it was before either.
		var existing map[string]any
		if ok, err := e.Store.Load(name, &existing); ok || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if err := e.Store.Save(name, rec); err != nil {
			return err
		}
	}
	return os.Remove(path)
}
