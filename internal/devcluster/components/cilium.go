package components

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Cilium is the dev cluster's NetworkPolicy engine, chained after the bridge CNI plugin
// (generic-veth): the bridge and host-local still wire and address pods, cilium-cni then makes
// each pod a Cilium endpoint whose veth carries Cilium's BPF programs, which enforce policy.
// kube-proxy keeps serving Services (no kube-proxy replacement), nothing is masqueraded or
// tunnelled. cilium-agent runs on the host like the other components; there is no operator, so
// Up applies the CRDs and the node's CiliumNode itself.

// ciliumPodCIDR is the node's Cilium IPAM range. Pods take their addresses from host-local;
// Cilium only takes its router address (cilium_host) from here, so the range sits inside the
// pod /16 but outside the real (10.244.0.2-254) and simulated (10.244.128.0/17) pod ranges.
const ciliumPodCIDR = "10.244.127.0/24"

// ciliumRunDir is the agent's fixed runtime dir: its API socket (cilium-cni dials it there),
// state, and the CNI plugin's log.
const ciliumRunDir = "/var/run/cilium"

var ciliumBinaries = []string{"cilium-agent", "cilium-cni", "cilium-dbg"}

// ciliumDir asks hack/build-cilium.sh where the pinned Cilium build lives.
func ciliumDir(e Env) (string, error) {
	root, err := e.Cfg.ResolveRepoRoot()
	if err != nil {
		return "", err
	}
	out, err := e.Host.Run(filepath.Join(root, "hack", "build-cilium.sh"), "--print-dir")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// ensureCilium builds Cilium when any piece is missing (first time ~6 min and ~3 GB on 2
// cores) and returns its folder: binaries, the bpf/ sources the agent compiles, the CRDs.
func ensureCilium(ctx context.Context, e Env) (string, error) {
	dir, err := ciliumDir(e)
	if err != nil {
		return "", err
	}
	complete := true
	for _, p := range append(slices.Clone(ciliumBinaries), "bpf", "crds/v2", "crds/v2alpha1") {
		complete = complete && spec.FileExists(filepath.Join(dir, p))
	}
	if complete {
		return dir, nil
	}
	e.Cfg.Progress("building Cilium into %s (first time: ~6 minutes and ~3 GB of memory on 2 cores)", dir)
	cmd := exec.CommandContext(ctx, filepath.Join(e.Cfg.RepoRoot, "hack", "build-cilium.sh"))
	cmd.Stdout, cmd.Stderr = e.Cfg.Out, e.Cfg.Out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building Cilium: %w", err)
	}
	return dir, nil
}

// ciliumToolsDir holds clang and llc links to Debian's clang-19/llc-19, first on the agent's
// PATH: it compiles bpf/*.c with `clang` and needs clang >= 18 (Debian 12's default is 14).
func ciliumToolsDir(e Env) (string, error) {
	dir := e.Cfg.Path("cilium", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for link, target := range map[string]string{"clang": "/usr/bin/clang-19", "llc": "/usr/bin/llc-19"} {
		if !e.Host.Exists(target) {
			return "", fmt.Errorf("%s is missing: run hack/install-node-deps.sh", target)
		}
		p := filepath.Join(dir, link)
		if cur, err := os.Readlink(p); err == nil && cur == target {
			continue
		}
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// ciliumArgs are the flags tried on this kind of machine (shared/reference): generic-veth
// chaining on the bridge, native routing in the pod /16, no masquerade, no kube-proxy
// replacement, no health probing. The L7 proxy is on for its DNS proxy, which enforces domain
// allow-lists (toFQDNs); it starts no Envoy unless an HTTP rule asks for one, and none of ours
// does. The DNS proxy needs bridged frames kept out of iptables (hostnet.Sysctls). --devices is never left out: without it the
// agent attaches BPF to the machine's own uplink. --allow-localhost=always: the host (kubelet
// probes, port-forward, host-process router and tools) always reaches pods; policies apply to
// pods and to traffic forwarded from other hosts or namespaces.
func ciliumArgs(e Env, dir string) []string {
	return []string{
		"--k8s-kubeconfig-path=" + e.Cfg.KubeconfigFor("cilium"),
		"--lib-dir=" + dir,
		"--identity-allocation-mode=crd",
		"--cni-chaining-mode=generic-veth", "--cni-exclusive=false",
		"--routing-mode=native", "--ipv4-native-routing-cidr=" + spec.PodSubnet,
		"--enable-ipv4-masquerade=false", "--enable-ipv6=false",
		"--kube-proxy-replacement=false", "--enable-l7-proxy=true",
		"--enable-local-node-route=false", "--enable-host-legacy-routing=true",
		"--install-no-conntrack-iptables-rules=false",
		"--enable-health-checking=false", "--enable-endpoint-health-checking=false",
		"--devices=" + spec.BridgeName,
		"--allow-localhost=always",
		"--agent-health-port=" + strconv.Itoa(e.Cfg.Ports.CiliumHealth),
		"--enable-gops=false",
	}
}

func ciliumAgent(e Env) (proc.Component, error) {
	dir := e.Bins.Cilium
	tools, err := ciliumToolsDir(e)
	if err != nil {
		return proc.Component{}, err
	}
	return proc.Component{
		Name: "cilium-agent", Exe: filepath.Join(dir, "cilium-agent"), Timeout: 3 * time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.CiliumHealth)},
		Args:  ciliumArgs(e, dir),
		Env: []string{
			// Else it waits, silently, for a Node named after the hostname.
			"K8S_NODE_NAME=" + spec.NodeName,
			"PATH=" + tools + ":" + os.Getenv("PATH"),
		},
		Ready: ciliumReady(e),
	}, nil
}

// ciliumReady: the agent's /healthz answers 200 once its status is OK.
func ciliumReady(e Env) func(context.Context) error {
	url := fmt.Sprintf("http://%s/healthz", spec.Loopback(e.Cfg.Ports.CiliumHealth))
	return func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, url, "") }
}

// prepareCilium does what the agent expects around it (bpffs is mounted by hostnet.BPFFS): its CRDs applied server-side (normally the operator's job)
// and established, the node's CiliumNode with a pod CIDR (the Node has no podCIDR).
func prepareCilium(ctx context.Context, e Env) error {
	dir := e.Bins.Cilium
	cl, err := kube.Client(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	var crds []*unstructured.Unstructured
	for _, v := range []string{"v2", "v2alpha1"} {
		objs, err := kube.ReadYAMLDir(filepath.Join(dir, "crds", v))
		if err != nil {
			return err
		}
		crds = append(crds, objs...)
	}
	e.Cfg.Progress("applying %d Cilium CRDs", len(crds))
	if err := kube.ApplyAll(ctx, cl, crds); err != nil {
		return err
	}
	err = e.Proc.WaitUntil(ctx, "Cilium's CRDs", nil, time.Minute, func(ctx context.Context) error {
		for _, crd := range crds {
			if err := kube.CRDEstablished(cl, crd.GetName())(ctx); err != nil {
				return fmt.Errorf("%s: %w", crd.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	node := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
		"metadata": map[string]any{"name": spec.NodeName},
		"spec":     map[string]any{"ipam": map[string]any{"podCIDRs": []any{ciliumPodCIDR}}},
	}}
	return kube.ApplyAll(ctx, cl, []*unstructured.Unstructured{node})
}

// ciliumLeftovers reports whether anything of a Cilium agent is on this machine: its links,
// pins or runtime dir.
func ciliumLeftovers(h host.Host) bool {
	out, _ := h.Run("ip", "-o", "link", "show")
	if strings.Contains(out, " cilium_") {
		return true
	}
	for _, p := range []string{ciliumRunDir, "/sys/fs/bpf/cilium", "/sys/fs/bpf/tc/globals"} {
		if h.Exists(p) {
			return true
		}
	}
	return false
}

// cleanupCilium removes what the (stopped) agent left: links, BPF pins, its runtime dir and
// cgroup2 mount, through the agent's own cleanup. The CILIUM_* iptables chains, the bpffs
// mount and the sysctls are hostnet's steps'.
// It runs only when ciliumRecord says that Up ran an agent: an agent of another cluster on
// this machine is none of Down's business.
func cleanupCilium(e Env) error {
	var rec ciliumDatapath
	if ok, err := e.Store.Load(ciliumRecord, &rec); !ok || err != nil {
		return err
	}
	if err := removeCiliumLeftovers(e); err != nil {
		return err
	}
	return e.Store.Remove(ciliumRecord)
}

// ciliumRecord names the record Up writes before it starts cilium-agent, whose datapath (links,
// BPF pins, its run dir) Down then removes.
const ciliumRecord = "cilium-datapath"

type ciliumDatapath struct {
	RunDir string `json:"runDir"`
}

// ciliumAgentRecorded records the agent's datapath, then builds its component.
func ciliumAgentRecorded(e Env) (proc.Component, error) {
	if err := e.Store.Save(ciliumRecord, ciliumDatapath{RunDir: ciliumRunDir}); err != nil {
		return proc.Component{}, err
	}
	return ciliumAgent(e)
}

func removeCiliumLeftovers(e Env) error {
	if !ciliumLeftovers(e.Host) {
		return nil
	}
	dir, err := ciliumDir(e)
	if err != nil {
		return err
	}
	dbg := filepath.Join(dir, "cilium-dbg")
	if !e.Host.Exists(dbg) {
		return fmt.Errorf("cilium state is left on this machine but %s is missing to clean it up (run hack/build-cilium.sh)", dbg)
	}
	e.Cfg.Progress("removing Cilium's links, BPF pins and state")
	if _, err := e.Host.Run(dbg, "post-uninstall-cleanup", "--all-state", "--force"); err != nil {
		return err
	}
	// Whatever the cleanup left mounted under the runtime dir (cgroup2), then the dir.
	if err := host.UnmountAll(e.Host, "/run/cilium"); err != nil {
		return err
	}
	return e.Host.RemoveAll(ciliumRunDir)
}

// prepareCiliumOnce prepares what the agent expects before it first starts.
func prepareCiliumOnce(ctx context.Context, e Env) error {
	if err := prepareCilium(ctx, e); err != nil {
		return fmt.Errorf("preparing Cilium: %w", err)
	}
	return nil
}
