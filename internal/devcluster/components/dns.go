package components

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/images"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Cluster DNS: CoreDNS as a Deployment in kube-system behind the kube-dns Service at
// spec.ClusterDNSIP, which the kubelet hands to pods. It answers cluster.local (and reverse lookups
// of cluster addresses) from the API, forwards the reserved zone test. to spec.TestDNSServer (where
// the end-to-end tests answer names from a lab network of their own; nothing answers there
// otherwise), and NXDOMAIN for everything else.

// corednsImage is the image reference, tagged with the version stamp build-k8s.sh writes next
// to the binary.
func corednsImage(bin string) string {
	tag := "dev"
	if b, err := os.ReadFile(filepath.Join(bin, "coredns.version")); err == nil && strings.TrimSpace(string(b)) != "" {
		tag = strings.TrimSpace(string(b))
	}
	return "docker.io/agent-sandbox/coredns:" + tag
}

// importCoreDNS packs the cached coredns binary as an image (the binary alone, run as a
// non-root user) and imports it into containerd.
func importCoreDNS(ctx context.Context, e Env, bin string) (string, error) {
	ref := corednsImage(bin)
	img := images.Server(ref, filepath.Join(bin, "coredns"), 53)
	dir := e.Cfg.Path("images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tarPath := filepath.Join(dir, "coredns.tar")
	if _, err := img.WriteArchiveFile(tarPath); err != nil {
		return "", fmt.Errorf("building image %s: %w", ref, err)
	}
	return ref, ctr(ctx, e, "images", "import", "--snapshotter", "overlayfs", tarPath)
}

// applyDNS imports the image and applies manifests/coredns.yaml; waitDNS waits for it.
func applyDNS(ctx context.Context, e Env) error {
	bin := e.Bins.K8s
	e.Cfg.Progress("installing CoreDNS (kube-dns at %s)", spec.ClusterDNSIP)
	ref, err := importCoreDNS(ctx, e, bin)
	if err != nil {
		return err
	}
	raw, err := manifests.ReadFile("manifests/coredns.yaml")
	if err != nil {
		return err
	}
	raw = bytes.ReplaceAll(raw, []byte("image: IMAGE"), []byte("image: "+ref))
	raw = bytes.ReplaceAll(raw, []byte("TEST_DNS_SERVER"), []byte(spec.TestDNSServer))
	objs, err := kube.DecodeYAML(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	cl, err := kube.Client(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	return kube.ApplyAll(ctx, cl, objs)
}

func waitDNS(ctx context.Context, e Env) error {
	return e.Proc.WaitUntil(ctx, "CoreDNS", nil, 2*time.Minute, func(ctx context.Context) error { return dnsReady(ctx, e) })
}

// dnsReady is true when the coredns Deployment runs its newest template and it is available.
func dnsReady(ctx context.Context, e Env) error {
	cs, err := kube.Clientset(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return err
	}
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas < 1 || st.AvailableReplicas < 1 || st.Replicas > st.UpdatedReplicas {
		return fmt.Errorf("coredns: %d updated, %d available, %d total", st.UpdatedReplicas, st.AvailableReplicas, st.Replicas)
	}
	return nil
}

// dnsStatus reports CoreDNS, a Deployment rather than a process.
func dnsStatus(ctx context.Context, e Env) ComponentStatus {
	st := ComponentStatus{Name: "coredns"}
	if e.Proc.Running("kube-apiserver") == nil {
		st.Detail = "not running"
		return st
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := dnsReady(cctx, e); err != nil {
		st.Detail = "Deployment: " + err.Error()
		return st
	}
	st.Healthy, st.Detail = true, "Deployment kube-system/coredns available, Service kube-dns "+spec.ClusterDNSIP
	return st
}

// dnsStep applies CoreDNS once the node runs; readyStep waits for it. Its pods go with the
// others.
type dnsStep struct{ env Env }

func (dnsStep) Name() string { return "coredns" }

func (s dnsStep) Up(ctx context.Context) error { return applyDNS(ctx, s.env) }

func (dnsStep) Down(context.Context) error { return nil }
