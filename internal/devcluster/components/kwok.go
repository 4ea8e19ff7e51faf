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
func writeKwokConfig(ctx context.Context, e Env) (string, error) {
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
	p := e.Cfg.Path("kwok", "stages.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644)
}

func kwok(ctx context.Context, e Env) (proc.Component, error) {
	bin := e.Bins.K8s
	cfg, err := writeKwokConfig(ctx, e)
	if err != nil {
		return proc.Component{}, err
	}
	return proc.Component{
		Name: "kwok", Exe: bin + "/kwok", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.KwokServer)},
		Args: []string{
			"--kubeconfig=" + e.Cfg.KubeconfigFor("kwok"),
			"--config=" + cfg,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwoknode.Annotation + "=fake",
			// Simulated pod IPs sit on our bridge's subnet, never routed off the machine.
			"--cidr=" + spec.KwokPodCIDR,
			"--node-ip=127.0.0.1",
			"--node-lease-duration-seconds=40",
			"--server-address=" + spec.Loopback(e.Cfg.Ports.KwokServer),
		},
		Ready: func(context.Context) error { return nil },
	}, nil
}

// ensureKwokNodes registers kwok-node-0..N-1 (tainted so only pods that tolerate the taint go
// there), removes higher-numbered ones left from a bigger cluster, and waits until all are Ready.
func ensureKwokNodes(ctx context.Context, e Env) error {
	cs, err := kube.Clientset(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	existing, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for i := 0; i < e.Cfg.KwokNodes; i++ {
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
		if err := e.Proc.WaitUntil(ctx, "simulated node "+name, nil, time.Minute, nodeReady(e, name)); err != nil {
			return err
		}
	}
	return nil
}

// kwokNodesReady: the simulated nodes are registered and Ready.
func kwokNodesReady(e Env) func(context.Context) error {
	return func(ctx context.Context) error {
		cs, err := kube.Clientset(e.Cfg.KubeconfigPath())
		if err != nil {
			return err
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if err := nodeReady(e, n.Name)(ctx); err != nil {
				return err
			}
		}
		if len(nodes.Items) == 0 {
			return fmt.Errorf("no simulated nodes registered")
		}
		return nil
	}
}

// kwokStep runs kwok and registers the simulated nodes (with --kwok-nodes); Down stops kwok.
type kwokStep struct{ env Env }

func (kwokStep) Name() string { return "kwok" }

func (s kwokStep) Up(ctx context.Context) error {
	e := s.env
	if e.Cfg.KwokNodes <= 0 {
		return nil
	}
	comp, err := kwok(ctx, e)
	if err != nil {
		return err
	}
	if err := e.Proc.Ensure(ctx, comp); err != nil {
		return err
	}
	e.Cfg.Progress("registering %d simulated (kwok) nodes", e.Cfg.KwokNodes)
	return ensureKwokNodes(ctx, e)
}

func (s kwokStep) Down(context.Context) error { return s.env.Proc.Stop("kwok") }
