package components

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/kwoknode"
)

const kwokModule = "sigs.k8s.io/kwok@v0.8.0" // same version as hack/build-k8s.sh builds

// The stock kwok stages we run: nodes initialise and keep a Lease (so kcm's node-lifecycle
// controller sees them alive), pods become ready, complete and are deleted.
var kwokStages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

// writeKwokConfig concatenates the stages that ship in the kwok module (kwok refuses to start
// without Stage objects). The module is already in the module cache once kwok was built.
func (c *Cluster) writeKwokConfig(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", kwokModule).Output()
	if err != nil {
		return "", fmt.Errorf("locating %s: %w", kwokModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("locating %s: no module dir (%v)", kwokModule, err)
	}
	var docs []string
	for _, s := range kwokStages {
		data, err := os.ReadFile(filepath.Join(mod.Dir, "kustomize", "stage", s))
		if err != nil {
			return "", err
		}
		docs = append(docs, strings.TrimSpace(string(data)))
	}
	p := c.Path("kwok", "stages.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644)
}

func (c *Cluster) kwok(ctx context.Context, bin string) (proc.Component, error) {
	cfg, err := c.writeKwokConfig(ctx)
	if err != nil {
		return proc.Component{}, err
	}
	return proc.Component{
		Name: "kwok", Exe: bin + "/kwok", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(c.Ports.KwokServer)},
		Args: []string{
			"--kubeconfig=" + c.KubeconfigFor("kwok"),
			"--config=" + cfg,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwoknode.Annotation + "=fake",
			// Simulated pod IPs sit on our bridge's subnet, never routed off the machine.
			"--cidr=" + spec.KwokPodCIDR,
			"--node-ip=127.0.0.1",
			"--node-lease-duration-seconds=40",
			"--server-address=" + spec.Loopback(c.Ports.KwokServer),
		},
		Ready: func(context.Context) error { return nil },
	}, nil
}

// ensureKwokNodes registers kwok-node-0..N-1 (tainted so only pods that tolerate the taint go
// there), removes higher-numbered ones left from a bigger cluster, and waits until all are Ready.
func (c *Cluster) ensureKwokNodes(ctx context.Context) error {
	cs, err := kube.Clientset(c.KubeconfigPath())
	if err != nil {
		return err
	}
	existing, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for i := 0; i < c.KwokNodes; i++ {
		want[fmt.Sprintf("kwok-node-%d", i)] = true
	}
	for _, n := range existing.Items {
		if !want[n.Name] {
			if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	for name := range want {
		_, err := cs.CoreV1().Nodes().Create(ctx, kwoknode.New(name, 250), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering %s: %w", name, err)
		}
	}
	for name := range want {
		if err := c.Proc.WaitUntil(ctx, "simulated node "+name, nil, time.Minute, c.nodeReady(name)); err != nil {
			return err
		}
	}
	return nil
}
