package devcluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// These tests need neither root nor a cluster; the cluster itself is exercised by test/e2e.

func testConfig(t *testing.T) *Config {
	t.Helper()
	c, err := (&Config{Dir: t.TempDir(), Out: io.Discard}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWithDefaultsRefusesSocketPathsTooLong(t *testing.T) {
	_, err := (&Config{Dir: "/tmp/" + strings.Repeat("x", 100), Out: io.Discard}).withDefaults()
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("got %v, want a too-long error", err)
	}
}

func TestPKIIdentities(t *testing.T) {
	c := testConfig(t)
	if err := c.ensurePKI(); err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(c.path("pki", "ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, tc := range []struct {
		name, cn, org string
		usage         x509.ExtKeyUsage
	}{
		{"admin", "agent-sandbox-dev-admin", "system:masters", x509.ExtKeyUsageClientAuth},
		{"kubelet", "system:node:" + NodeName, "system:nodes", x509.ExtKeyUsageClientAuth},
		{"controller", controllerUser, "", x509.ExtKeyUsageClientAuth},
		{"apiserver", "kube-apiserver", "", x509.ExtKeyUsageServerAuth},
		{"kubelet-serving", NodeName, "", x509.ExtKeyUsageServerAuth},
	} {
		data, _ := os.ReadFile(c.path("pki", tc.name+".crt"))
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatalf("%s: no certificate", tc.name)
		}
		crt, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := crt.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s: does not verify against the CA: %v", tc.name, err)
		}
		if crt.Subject.CommonName != tc.cn || (tc.org != "" && (len(crt.Subject.Organization) != 1 || crt.Subject.Organization[0] != tc.org)) {
			t.Errorf("%s: subject %v, want CN=%s O=%s", tc.name, crt.Subject, tc.cn, tc.org)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != c.apiServerURL() || len(cfg.CertData) == 0 {
		t.Fatalf("admin kubeconfig: host %s, client cert %d bytes", cfg.Host, len(cfg.CertData))
	}
	// A second run keeps the CA, so kubeconfigs handed out earlier stay valid.
	if err := c.ensurePKI(); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(c.path("pki", "ca.crt")); string(again) != string(caPEM) {
		t.Fatal("ensurePKI replaced an existing CA")
	}
}

func TestGeneratedConfigs(t *testing.T) {
	c := testConfig(t)
	var kubelet map[string]any
	if err := yaml.Unmarshal([]byte(c.kubeletConfig()), &kubelet); err != nil {
		t.Fatalf("kubelet config: %v", err)
	}
	for key, want := range map[string]any{"cgroupDriver": "cgroupfs", "failCgroupV1": false, "address": bridgeIP, "readOnlyPort": float64(0), "clusterDomain": "cluster.local"} {
		if kubelet[key] != want {
			t.Errorf("kubelet %s = %v, want %v", key, kubelet[key], want)
		}
	}
	if dns, _ := kubelet["clusterDNS"].([]any); len(dns) != 1 || dns[0] != clusterDNSIP {
		t.Errorf("kubelet clusterDNS = %v, want [%s]", kubelet["clusterDNS"], clusterDNSIP)
	}
	// The VM lacks CAP_SYS_RESOURCE: without this, every pod sandbox fails to start.
	if cd := c.containerdConfig(); !strings.Contains(cd, "restrict_oom_score_adj = true") || !strings.Contains(cd, "SystemdCgroup = false") {
		t.Errorf("containerd config lacks a required setting:\n%s", cd)
	}
	if cd := c.containerdConfig(); !strings.Contains(cd, fmt.Sprintf("bin_dir = %q", c.cniBinDir())) {
		t.Errorf("containerd does not take CNI plugins from %s:\n%s", c.cniBinDir(), cd)
	}
	if err := c.writeCNIConfig("/cache/cilium"); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(c.cniBinDir(), "cilium-cni")); err != nil || target != "/cache/cilium/cilium-cni" {
		t.Errorf("cilium-cni link: %q %v", target, err)
	}
	data, _ := os.ReadFile(filepath.Join(c.path("cni", "net.d"), "10-agent-sandbox-dev.conflist"))
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
	if err := json.Unmarshal(data, &cni); err != nil || len(cni.Plugins) != 2 {
		t.Fatalf("CNI config: %v %s", err, data)
	}
	// Pods route through the bridge (ClusterIPs, this machine) and are never masqueraded.
	if p := cni.Plugins[0]; p.Type != "bridge" || p.Bridge != BridgeName || !p.IsGateway || p.IPMasq ||
		len(p.IPAM.Routes) != 1 || p.IPAM.Routes[0]["dst"] != "0.0.0.0/0" {
		t.Fatalf("CNI bridge plugin %+v", p)
	}
	// Cilium, chained after the bridge, is what enforces NetworkPolicy.
	if p := cni.Plugins[1]; p.Type != "cilium-cni" || p.Chaining != "generic-veth" {
		t.Fatalf("chained CNI plugin %+v", p)
	}
}

func TestKubeProxyAndCiliumConfigs(t *testing.T) {
	c := testConfig(t)
	var kp map[string]any
	if err := yaml.Unmarshal([]byte(c.kubeProxyConfig()), &kp); err != nil {
		t.Fatalf("kube-proxy config: %v", err)
	}
	for key, want := range map[string]any{"mode": "iptables", "clusterCIDR": podSubnet, "bindAddress": bridgeIP,
		"healthzBindAddress": loopback(c.Ports.KubeProxyHealthz), "metricsBindAddress": loopback(c.Ports.KubeProxyMetrics)} {
		if kp[key] != want {
			t.Errorf("kube-proxy %s = %v, want %v", key, kp[key], want)
		}
	}
	// route_localnet stays as it is; conntrack sysctls too.
	if ipt, _ := kp["iptables"].(map[string]any); ipt["localhostNodePorts"] != any(false) {
		t.Errorf("kube-proxy iptables = %v, want localhostNodePorts false", kp["iptables"])
	}
	if ct, _ := kp["conntrack"].(map[string]any); ct["maxPerCore"] != float64(0) {
		t.Errorf("kube-proxy conntrack = %v, want maxPerCore 0", kp["conntrack"])
	}
	args := strings.Join(c.ciliumArgs("/cache/cilium"), " ")
	// Without --devices the agent attaches to the machine's uplink.
	for _, want := range []string{"--devices=" + BridgeName, "--cni-chaining-mode=generic-veth", "--kube-proxy-replacement=false",
		"--enable-ipv4-masquerade=false", "--lib-dir=/cache/cilium", "--allow-localhost=always"} {
		if !strings.Contains(args, want) {
			t.Errorf("cilium-agent args lack %s: %s", want, args)
		}
	}
}

func TestAPIServerCertificateIsReissuedForNewNames(t *testing.T) {
	c := testConfig(t)
	if err := c.ensurePKI(); err != nil {
		t.Fatal(err)
	}
	var spec certSpec
	for _, s := range c.certSpecs() {
		if s.name == "apiserver" {
			spec = s
		}
	}
	crt := c.path("pki", "apiserver.crt")
	if !coversNames(crt, spec) {
		t.Fatal("a fresh API server certificate does not cover its own names")
	}
	for _, name := range []string{bridgeIP, "127.0.0.1", "10.96.0.1"} {
		if !slices.Contains(spec.ips, name) {
			t.Errorf("API server certificate lacks %s", name)
		}
	}
	spec.ips = append(spec.ips, "10.244.0.99")
	if coversNames(crt, spec) {
		t.Fatal("a certificate without a wanted address counts as covering it")
	}
}

func TestChainsAndNftListing(t *testing.T) {
	for ch, want := range map[string]bool{"KUBE-SERVICES": true, "CNI-abc": true, "CILIUM_FORWARD": true, guardChain: true, "DOCKER": false, "FORWARD": false} {
		if isOurChain(ch) != want {
			t.Errorf("isOurChain(%s) = %v", ch, !want)
		}
	}
	empty := "table ip raw {\n\tchain PREROUTING {\n\t\ttype filter hook prerouting priority raw; policy accept;\n\t}\n}\n"
	if hasNftRules(empty) {
		t.Error("an nft table with only chain headers counts as holding rules")
	}
	if !hasNftRules(strings.Replace(empty, "policy accept;\n", "policy accept;\n\t\tmeta mark 0x200 notrack\n", 1)) {
		t.Error("an nft table with a rule counts as empty")
	}
}

func TestProcessRecordIdentity(t *testing.T) {
	st, ok := procStat(os.Getpid())
	if !ok {
		t.Fatal("cannot read our own /proc stat")
	}
	self := &procRecord{PID: os.Getpid(), StartTime: st.start}
	if !self.alive() {
		t.Fatal("our own process is not alive")
	}
	// The same pid with another start time is a different process (pid reuse).
	if (&procRecord{PID: os.Getpid(), StartTime: st.start + 1}).alive() {
		t.Fatal("a reused pid counted as our process")
	}
}

func TestSplitIptablesRule(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`-A INPUT -j KUBE-FIREWALL`, []string{"-A", "INPUT", "-j", "KUBE-FIREWALL"}},
		{`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
			[]string{"-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}},
		{`-A X -m comment --comment "say \"hi\"" -j CNI-1`, []string{"-A", "X", "-m", "comment", "--comment", `say "hi"`, "-j", "CNI-1"}},
	} {
		got := splitRule(tc.line)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("splitRule(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestRestartRefusesWhatItCannotRestart(t *testing.T) {
	cases := []struct {
		name, component, want string
	}{
		{"a component that is not restartable on its own", "cilium-agent", "cannot be restarted on its own"},
		{"a component that does not run", "kubelet", "kubelet is not running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Restart(context.Background(), Config{Dir: shortTempDir(t), Out: io.Discard}, tc.component, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restart(%s) = %v, want an error saying %q", tc.component, err, tc.want)
			}
		})
	}
}

// shortTempDir is a temporary state dir short enough for containerd's socket path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dev")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// A process has exited only once nothing of it is left: not while it (or a thread) runs, and
// a zombie whose threads are all gone has.
func TestProcessExitedOnlyWhenNothingOfItRuns(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, _ := procStat(cmd.Process.Pid)
	r := &procRecord{PID: cmd.Process.Pid, StartTime: st.start}
	if r.exited() {
		t.Fatal("a running process counted as exited")
	}
	if self, _ := procStat(os.Getpid()); (&procRecord{PID: os.Getpid(), StartTime: self.start}).exited() {
		t.Fatal("this test process (many threads) counted as exited")
	}
	_ = cmd.Process.Kill()
	if !waitGone(r, 5*time.Second) {
		t.Fatal("a killed process, a zombie until reaped, did not count as exited")
	}
	_ = cmd.Wait()
	if !r.exited() {
		t.Fatal("a reaped process did not count as exited")
	}
}
