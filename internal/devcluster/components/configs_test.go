package components

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"sigs.k8s.io/yaml"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/antispoof"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostpathprov"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testEnv(t *testing.T) Env {
	t.Helper()
	dir := t.TempDir()
	c, err := (&spec.Config{Dir: dir, Out: io.Discard, HibernateDir: filepath.Join(dir, "hib")}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return NewEnv(c)
}

func TestGeneratedConfigs(t *testing.T) {
	c := testEnv(t)
	var kubelet map[string]any
	if err := yaml.Unmarshal([]byte(kubeletConfig(c)), &kubelet); err != nil {
		t.Fatalf("kubelet config: %v", err)
	}
	for key, want := range map[string]any{"cgroupDriver": "cgroupfs", "failCgroupV1": false, "address": spec.BridgeIP, "readOnlyPort": float64(0), "clusterDomain": "cluster.local"} {
		if kubelet[key] != want {
			t.Errorf("kubelet %s = %v, want %v", key, kubelet[key], want)
		}
	}
	if dns, _ := kubelet["clusterDNS"].([]any); len(dns) != 1 || dns[0] != spec.ClusterDNSIP {
		t.Errorf("kubelet clusterDNS = %v, want [%s]", kubelet["clusterDNS"], spec.ClusterDNSIP)
	}
	// The VM lacks CAP_SYS_RESOURCE: without this, every pod sandbox fails to start.
	if cd := containerdConfig(c, "/cache/gvisor"); !strings.Contains(cd, "restrict_oom_score_adj = true") || !strings.Contains(cd, "SystemdCgroup = false") {
		t.Errorf("containerd config lacks a required setting:\n%s", cd)
	}
	if cd := containerdConfig(c, "/cache/gvisor"); !strings.Contains(cd, fmt.Sprintf("bin_dir = %q", c.Cfg.CNIBinDir())) {
		t.Errorf("containerd does not take CNI plugins from %s:\n%s", c.Cfg.CNIBinDir(), cd)
	}
	c.Bins.Cilium = "/cache/cilium"
	if err := (cniConfigStep{c}).Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(c.Cfg.CNIBinDir(), "cilium-cni")); err != nil || target != "/cache/cilium/cilium-cni" {
		t.Errorf("cilium-cni link: %q %v", target, err)
	}
	data, _ := os.ReadFile(filepath.Join(c.Cfg.Path("cni", "net.d"), "10-agent-sandbox-dev.conflist"))
	var cni struct {
		Plugins []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
			Chaining  string `json:"chaining-mode"`
			IPAM      struct {
				Routes []map[string]string `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &cni); err != nil || len(cni.Plugins) != 3 {
		t.Fatalf("CNI config: %v %s", err, data)
	}
	// Pods route through the bridge (ClusterIPs, this machine) and are never masqueraded.
	if p := cni.Plugins[0]; p.Type != "bridge" || p.Bridge != spec.BridgeName || !p.IsGateway || p.IPMasq ||
		len(p.IPAM.Routes) != 1 || p.IPAM.Routes[0]["dst"] != "0.0.0.0/0" {
		t.Fatalf("CNI bridge plugin %+v", p)
	}
	// Anti-spoofing guards the pod's bridge port right after the bridge made it (issue 37).
	if p := cni.Plugins[1]; p.Type != antispoof.PluginType {
		t.Fatalf("anti-spoofing plugin %+v", p)
	}
	if target, err := os.Readlink(filepath.Join(c.Cfg.CNIBinDir(), antispoof.PluginType)); err != nil || target != c.Cfg.Path("bin", "cni-antispoof") {
		t.Errorf("%s link: %q %v", antispoof.PluginType, target, err)
	}
	// Cilium, chained after them, is what enforces NetworkPolicy.
	if p := cni.Plugins[2]; p.Type != "cilium-cni" || p.Chaining != "generic-veth" {
		t.Fatalf("chained CNI plugin %+v", p)
	}
}

func TestKubeProxyAndCiliumConfigs(t *testing.T) {
	c := testEnv(t)
	var kp map[string]any
	if err := yaml.Unmarshal([]byte(kubeProxyConfig(c)), &kp); err != nil {
		t.Fatalf("kube-proxy config: %v", err)
	}
	for key, want := range map[string]any{"mode": "iptables", "clusterCIDR": spec.PodSubnet, "bindAddress": spec.BridgeIP,
		"healthzBindAddress": spec.Loopback(c.Cfg.Ports.KubeProxyHealthz), "metricsBindAddress": spec.Loopback(c.Cfg.Ports.KubeProxyMetrics)} {
		if kp[key] != want {
			t.Errorf("kube-proxy %s = %v, want %v", key, kp[key], want)
		}
	}
	// route_localnet stays as it is; conntrack sysctls too.
	if ipt, _ := kp["iptables"].(map[string]any); ipt["localhostNodePorts"] != any(false) {
		t.Errorf("kube-proxy iptables = %v, want localhostNodePorts false", kp["iptables"])
	}
	if ct, _ := kp["conntrack"].(map[string]any); ct["maxPerCore"] != float64(0) || ct["tcpBeLiberal"] != any(true) {
		t.Errorf("kube-proxy conntrack = %v, want maxPerCore 0 and tcpBeLiberal (no drop of the INVALID half of pod-to-pod Service traffic)", kp["conntrack"])
	}
	args := strings.Join(ciliumArgs(c, "/cache/cilium"), " ")
	// Without --devices the agent attaches to the machine's uplink.
	for _, want := range []string{"--devices=" + spec.BridgeName, "--cni-chaining-mode=generic-veth", "--kube-proxy-replacement=false",
		"--enable-ipv4-masquerade=false", "--lib-dir=/cache/cilium", "--allow-localhost=always"} {
		if !strings.Contains(args, want) {
			t.Errorf("cilium-agent args lack %s: %s", want, args)
		}
	}
}

// PVs come from our provisioner, not kube-controller-manager's (whose directories are 0750
// root-owned, which a non-root sandbox cannot write).
func TestVolumesComeFromTheHostPathProvisioner(t *testing.T) {
	c := testEnv(t)
	if args := controllerManager(c).Args; slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "hostpath-provisioner") }) {
		t.Errorf("kube-controller-manager still runs its own hostpath provisioner: %v", args)
	}
	prov := hostPathProvisioner(c)
	if prov.Exe != c.Cfg.OurBin("devcluster") {
		t.Errorf("provisioner binary = %s, want %s", prov.Exe, c.Cfg.OurBin("devcluster"))
	}
	health := spec.Loopback(c.Cfg.Ports.ProvisionerHealth)
	wantArgs := []string{"hostpath-provisioner", "--kubeconfig=" + c.Cfg.KubeconfigFor("hostpath-provisioner"),
		"--root=" + hostpathprov.DefaultRoot, "--health-addr=" + health}
	if !slices.Equal(prov.Args, wantArgs) {
		t.Errorf("provisioner args = %q, want %q", prov.Args, wantArgs)
	}
	if !slices.Equal(prov.Addrs, []string{health}) {
		t.Errorf("provisioner addrs = %q, want its health address %s (checked free by preflight)", prov.Addrs, health)
	}
	if !slices.Contains(ProcessNames(), prov.Name) {
		t.Errorf("%s is not in ProcessNames: status would not report it", prov.Name)
	}

	raw, err := manifests.ReadFile("manifests/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kube.DecodeYAML(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var class map[string]any
	for _, o := range objs {
		if o.GetKind() == "StorageClass" && o.GetName() == spec.StorageClass {
			class = o.Object
		}
	}
	if class == nil {
		t.Fatalf("cluster.yaml has no StorageClass %s", spec.StorageClass)
	}
	for key, want := range map[string]any{"provisioner": hostpathprov.Name, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"} {
		if class[key] != want {
			t.Errorf("StorageClass %s = %v, want %v", key, class[key], want)
		}
	}
	if ann, _ := class["metadata"].(map[string]any)["annotations"].(map[string]any); ann["storageclass.kubernetes.io/is-default-class"] != "true" {
		t.Errorf("StorageClass %s is not the default class: annotations %v", spec.StorageClass, ann)
	}
}

// up builds each of our packages by its folder: one that moved breaks every up.
func TestOurPackagesAreFoldersOfTheSourceTree(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := spec.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range ourPackages {
		if fi, err := os.Stat(filepath.Join(root, pkg)); err != nil || !fi.IsDir() {
			t.Errorf("our package %s is not a folder of the source tree: %v", pkg, err)
		}
	}
}
