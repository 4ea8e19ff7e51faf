package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/kwoknode"
)

// startKwok runs kwok for the simulated nodes and registers them; kwok keeps them Ready and
// moves their pods to Running with an IP, which is all a control-plane benchmark needs.
func (e *Env) startKwok(nodes int) error {
	kubeconfig, err := e.Kubeconfig("kwok")
	if err != nil {
		return err
	}
	stages, err := writeKwokStages(e.dataDir)
	if err != nil {
		return err
	}
	if err := e.start("kwok",
		"--kubeconfig="+kubeconfig,
		"--config="+stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwoknode.Annotation+"=fake",
		"--cidr=10.128.0.1/12", // simulated pod IPs; nothing is ever sent to them
		"--node-ip=127.0.0.1",
		"--server-address=127.0.0.1:0",
	); err != nil {
		return err
	}
	ctx := context.Background()
	for i := 0; i < nodes; i++ {
		node := kwoknode.New(fmt.Sprintf("kwok-node-%d", i), 1000)
		if err := e.Client.Create(ctx, node); err != nil {
			return fmt.Errorf("registering simulated node: %w", err)
		}
		// The API server taints new nodes not-ready; the node lifecycle controller, which we
		// don't run (it would taint simulated nodes whose heartbeats lag under load), would
		// lift it once kwok reports Ready. Our own taint goes too: this control plane has no
		// real node to keep workloads on, and a toleration is node choice, which admission
		// refuses in a namespace not opted in to host access (the benchmark's pods need none).
		untainted := node.DeepCopy()
		untainted.Spec.Taints = nil
		// A merge patch, not an update: kwok is writing the node's status at the same time.
		if err := e.Client.Patch(ctx, untainted, client.MergeFrom(node)); err != nil {
			return fmt.Errorf("untainting simulated node: %w", err)
		}
	}
	return nil
}

// writeKwokStages copies the stock stages that ship in the kwok module (node heartbeat with
// lease, pod ready/complete/delete) into one config file.
func writeKwokStages(dir string) (string, error) {
	src, err := kwokStageDir()
	if err != nil {
		return "", err
	}
	var docs []string
	err = filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, "kustomization.yaml") {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if !wantedStage(rel) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs = append(docs, strings.TrimSpace(string(data)))
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(docs) == 0 {
		return "", fmt.Errorf("no kwok stages found under %s", src)
	}
	out := filepath.Join(dir, "kwok-stages.yaml")
	return out, os.WriteFile(out, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600)
}

// kwokStageDir is where hack/build-k8s.sh puts kwok's stock stages, beside the binaries.
func kwokStageDir() (string, error) {
	dir := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kwok-stages")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("kwok stages: %w (run hack/build-k8s.sh kwok)", err)
	}
	return dir, nil
}

// wantedStage picks the fast lifecycle: nodes Ready with a lease heartbeat, pods Running and
// Ready at once, completed and deleted pods cleaned up.
func wantedStage(rel string) bool {
	switch filepath.ToSlash(rel) {
	case "node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml":
		return true
	}
	return false
}
