//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// Faults of the node and the control plane under the installed system (issue 24): containerd
// and the kubelet restart, etcd and then kube-apiserver are SIGKILLed and started again, one
// after another, while clients create and list claims, an SDK client lists Sandboxes and runs
// commands through the router in a sandbox that already runs.

// nodeFault is one restart and what it may cost.
type nodeFault struct {
	component string
	kill      bool // SIGKILL (a crash) rather than a stop
	// apiDown: the API server cannot answer for a moment, so raw API calls may fail (they are
	// counted); when false, nothing a client does may fail.
	apiDown bool
}

var nodeFaults = []nodeFault{
	{component: "containerd"},
	{component: "kubelet"},
	{component: "etcd", kill: true, apiDown: true},
	// SIGKILL, as etcd: here a SIGTERM makes kube-apiserver wait for its open streams until it
	// is killed after a minute anyway, refusing connections all along.
	{component: "kube-apiserver", kill: true, apiDown: true},
}

// window is a span of time around one fault.
type window struct {
	fault    nodeFault
	from, to time.Time
}

// sdkLoad lists Sandboxes with the SDK (which retries reads while the API server is away) and
// runs a command through the router in sb, each every 200 ms, until stop is closed.
func sdkLoad(stop <-chan struct{}, cli *sdk.Client, sb *sdk.Sandbox, log *callLog) *sync.WaitGroup {
	var wg sync.WaitGroup
	loop := func(f func(ctx context.Context)) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				f(ctx)
				cancel()
			}
		})
	}
	loop(func(ctx context.Context) {
		_, err := cli.ListSandboxes(ctx, "")
		log.record("sdk list Sandboxes", err)
	})
	loop(func(ctx context.Context) {
		res, err := sb.Run(ctx, sdk.Shell("echo alive"))
		if err == nil && strings.TrimSpace(res.Stdout) != "alive" {
			err = fmt.Errorf("stdout %q, want alive", res.Stdout)
		}
		log.record("router command", err)
	})
	return &wg
}

// systemReady checks that the node is Ready and both Deployments of the install have every
// replica ready.
func systemReady(ctx context.Context) error {
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: spec.NodeName}, node); err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return fmt.Errorf("node %s: %s", node.Name, c.Reason)
		}
	}
	for _, name := range []string{"agent-sandbox-controller", "sandbox-router"} {
		d := &appsv1.Deployment{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: spec.SystemNS, Name: name}, d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas < *d.Spec.Replicas {
			return fmt.Errorf("%s: %d of %d replicas ready", name, d.Status.ReadyReplicas, *d.Spec.Replicas)
		}
	}
	return nil
}

// systemRestarts counts the restarts of each container of the install's pods.
func systemRestarts(t *testing.T) map[string]int32 {
	t.Helper()
	var pods corev1.PodList
	mustf(t, kube.List(t.Context(), &pods, client.InNamespace(spec.SystemNS)), "listing the install's pods")
	n := map[string]int32{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			n[p.Name+"/"+cs.Name] = cs.RestartCount
		}
	}
	return n
}

// restartedSince lists the containers whose restart count grew.
func restartedSince(before, after map[string]int32) []string {
	var out []string
	for c, n := range after {
		if n > before[c] {
			out = append(out, fmt.Sprintf("%s +%d", c, n-before[c]))
		}
	}
	slices.Sort(out)
	return out
}

func TestSandboxesAndClaimsLiveThroughNodeAndControlPlaneRestarts(t *testing.T) {
	ns := newNamespace(t, "nodefault")
	ctx := t.Context()
	mustf(t, kube.Create(ctx, testwrap.MakeTemplate(ns, "pinned").Containers(runtimeContainer()).
		NodeSelector("kubernetes.io/hostname", "nowhere").Obj()), "creating the template")
	cli := sdkClient(t, ns)
	sb, err := cli.CreateSandbox(ctx, runtimeSandbox(ns, "target"))
	mustf(t, err, "creating sandbox target")
	podBefore, err := podOf(ctx, ns, "target")
	mustf(t, err, "reading target's pod")

	stop := make(chan struct{})
	stopLoad := sync.OnceFunc(func() { close(stop) })
	claims, calls := newCallLog(), newCallLog()
	claimCalls := claimLoad(context.Background(), stop, ns, claims)
	sdkCalls := sdkLoad(stop, cli, sb, calls)
	t.Cleanup(func() { stopLoad(); claimCalls.Wait(); sdkCalls.Wait() })
	time.Sleep(2 * time.Second) // calls before the first fault

	cfg := spec.Config{Dir: cluster.Dir}
	var windows []window
	for _, f := range nodeFaults {
		before := systemRestarts(t)
		from := time.Now()
		away, err := devcluster.Restart(ctx, cfg, f.component, f.kill)
		mustf(t, err, "restarting %s", f.component)
		waitedFor := map[string]bool{} // what the install was not ready for, once each
		slow.EventuallyContext(t, "the node and the install ready after restarting "+f.component, func(ctx context.Context) error {
			err := systemReady(ctx)
			if err != nil && !waitedFor[err.Error()] {
				waitedFor[err.Error()] = true
				t.Logf("%s after the %s fault: %v", time.Since(from).Round(100*time.Millisecond), f.component, err)
			}
			return err
		})
		recovered := time.Since(from)
		time.Sleep(2 * time.Second) // calls after the fault, still counted against it
		windows = append(windows, window{f, from, time.Now()})
		t.Logf("%s %s: back in %s, node and install ready after %s; containers of the install restarted: %v", map[bool]string{true: "killed", false: "restarted"}[f.kill],
			f.component, away.Round(10*time.Millisecond), recovered.Round(100*time.Millisecond), restartedSince(before, systemRestarts(t)))
	}
	stopLoad()
	claimCalls.Wait()
	sdkCalls.Wait()

	// Raw API clients (kubectl, the Python SDK) do not retry: their failures while the API
	// server is away are counted, not refused; any other failure is.
	for _, w := range windows {
		raw := claims.between(w.from, w.to, "")
		t.Logf("%s: %d of the raw clients' API calls failed", w.fault.component, len(raw))
		if len(raw) > 0 && !w.fault.apiDown {
			t.Errorf("%s restart: %d raw API calls failed, want none (the API server stayed up); first: %s", w.fault.component, len(raw), raw[0])
		}
		for _, prefix := range []string{"sdk list Sandboxes", "router command"} {
			failed := calls.between(w.from, w.to, prefix)
			t.Logf("%s: %s failed %d times", w.fault.component, prefix, len(failed))
			for i, f := range failed {
				if i == 5 {
					break
				}
				t.Errorf("during the %s fault: %s", w.fault.component, f)
			}
		}
	}
	claims.mu.Lock()
	t.Logf("raw clients' calls %v, failed %d in all; SDK calls %v", claims.calls, len(claims.failures), calls.calls)
	claims.mu.Unlock()

	// The sandbox's pod lived through it all: same pod, no container restarted.
	podAfter, err := podOf(ctx, ns, "target")
	mustf(t, err, "reading target's pod")
	if podAfter.UID != podBefore.UID || restarts(podAfter) != restarts(podBefore) {
		t.Errorf("target's pod: uid %s → %s, restarts %d → %d; want the same pod, never restarted",
			podBefore.UID, podAfter.UID, restarts(podBefore), restarts(podAfter))
	}
	expectOneSandboxPerAcknowledgedClaim(t, ns, claims)
}
