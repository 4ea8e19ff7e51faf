//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// dumpKeepMemoryOnFailure logs, when the test failed, what the node agent, the controller and
// the runsc wrapper said, and the namespace's events: the cluster is gone once the run ends.
func dumpKeepMemoryOnFailure(t *testing.T, ns string) {
	since := time.Now()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background() // the test's own is done by now
		for _, app := range []string{"agent-sandbox-node-agent", "agent-sandbox-controller"} {
			var pods corev1.PodList
			if err := kube.List(ctx, &pods, client.InNamespace(spec.SystemNS), client.MatchingLabels{"app": app}); err != nil {
				t.Logf("listing %s: %v", app, err)
				continue
			}
			for _, p := range pods.Items {
				logs, err := kcs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
				for _, line := range strings.Split(string(logs), "\n") {
					if app == "agent-sandbox-node-agent" || strings.Contains(line, ns) || strings.Contains(line, "memory") {
						t.Logf("%s: %s", p.Name, line)
					}
				}
				if err != nil {
					t.Logf("logs of %s: %v", p.Name, err)
				}
			}
		}
		var events corev1.EventList
		if err := kube.List(ctx, &events, client.InNamespace(ns)); err == nil {
			for _, e := range events.Items {
				t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		dir := os.Getenv("E2E_DEV_DIR")
		if dir == "" {
			dir = spec.DefaultDir()
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", "runsc", "*", "runsc.restore.log"))
		shims, _ := filepath.Glob(filepath.Join(dir, "logs", "runsc", "runsc-shim-*.log"))
		for _, f := range append(logs, shims...) {
			if info, err := os.Stat(f); err != nil || info.ModTime().Before(since) {
				continue // another run's
			}
			data, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, "restore") || strings.Contains(line, "heckpoint") || strings.Contains(strings.ToLower(line), "error") {
					t.Logf("%s: %.400s", filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), line)
				}
			}
		}
	})
}
