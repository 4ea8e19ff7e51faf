package devcluster

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	for key, want := range map[string]any{"cgroupDriver": "cgroupfs", "failCgroupV1": false, "address": bridgeIP, "readOnlyPort": float64(0)} {
		if kubelet[key] != want {
			t.Errorf("kubelet %s = %v, want %v", key, kubelet[key], want)
		}
	}
	// The VM lacks CAP_SYS_RESOURCE: without this, every pod sandbox fails to start.
	if cd := c.containerdConfig(); !strings.Contains(cd, "restrict_oom_score_adj = true") || !strings.Contains(cd, "SystemdCgroup = false") {
		t.Errorf("containerd config lacks a required setting:\n%s", cd)
	}
	if err := c.writeCNIConfig(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(c.path("cni", "net.d"), "10-agent-sandbox-dev.conflist"))
	var cni struct {
		Plugins []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &cni); err != nil || len(cni.Plugins) != 1 {
		t.Fatalf("CNI config: %v %s", err, data)
	}
	// Pods get no default route and no masquerade: nothing they send leaves the machine.
	if p := cni.Plugins[0]; p.Type != "bridge" || p.Bridge != BridgeName || p.IsGateway || p.IPMasq {
		t.Fatalf("CNI bridge plugin %+v", p)
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
