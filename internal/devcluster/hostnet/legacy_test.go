package hostnet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// The host.json of an older `up`, as Down of this version finds it.
const legacyHostJSON = `{
  "ipForward": "0",
  "createdPaths": ["/tmp/hostpath_pv", "/sys/fs/cgroup/memory/kubepods"],
  "netns": ["theirs"],
  "chains": {"iptables/filter": ["DOCKER-USER"]},
  "sysctls": {"net/ipv4/conf/all/accept_redirects": "0"},
  "nftTables": ["inet filter"],
  "netnsMounted": true
}`

func TestDownRestoresTheHostAnOlderUpRecordedInHostJSON(t *testing.T) {
	f, dir := aHost(), t.TempDir()
	before := f.State()
	// What the older up (and its cluster) did to the host after writing host.json.
	f.Mkdir("/tmp/hostpath_pv/pvc-1")
	f.Mkdir("/sys/fs/cgroup/memory/kubepods/pod1")
	f.AddChain("iptables/filter", GuardChain, "-j\x00DROP")
	f.AddChain("iptables/filter", "FORWARD", "-j\x00"+GuardChain)
	f.SetFile("/proc/sys/net/ipv4/ip_forward", "1\n")
	f.SetFile("/proc/sys/net/ipv4/conf/all/accept_redirects", "1\n")
	f.SetFile("/var/run/netns/cni-1", "")
	f.AddMount(NetnsDir, "bind")
	f.AddLink(spec.BridgeName, "bridge")
	legacy := filepath.Join(dir, "host.json")
	if err := os.WriteFile(legacy, []byte(legacyHostJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "host")
	if err := ImportLegacy(env(f, records), legacy, dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("host.json is kept after its import: %v", err)
	}
	for i := len(theSteps) - 1; i >= 0; i-- {
		if err := theSteps[i].step(f, records).Down(t.Context()); err != nil {
			t.Fatalf("%s: %v", theSteps[i].name, err)
		}
	}
	if after := f.State(); after != before {
		t.Errorf("Down from an imported host.json left changes:\n%s", diff(before, after))
	}
}

func TestImportingHostJSONKeepsTheStepsOwnRecords(t *testing.T) {
	f, dir := aHost(), t.TempDir()
	e := env(f, filepath.Join(dir, "host"))
	// This version's up ran first and recorded ip_forward=0; an older up then wrote host.json
	// from the host as this one had changed it.
	if err := e.Store.Save("sysctls", sysctlsRecord{Values: map[string]string{"net/ipv4/ip_forward": "0"}}); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(dir, "host.json")
	if err := os.WriteFile(legacy, []byte(`{"ipForward": "1", "sysctls": {"net/ipv4/ip_forward": "1"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ImportLegacy(e, legacy, dir, nil); err != nil {
		t.Fatal(err)
	}
	var rec sysctlsRecord
	if _, err := e.Store.Load("sysctls", &rec); err != nil || rec.Values["net/ipv4/ip_forward"] != "0" {
		t.Errorf("sysctls record = %+v (%v), want the first record's ip_forward 0", rec, err)
	}
}
