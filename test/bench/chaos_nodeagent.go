package bench

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// resyncAnnotation is what nodeAgentResync writes to a stuck pod to make kwok look at it again.
const resyncAnnotation = "bench.agents.x-k8s.io/node-agent-resync"

// nodeAgentResync stands in for the kubelet's status sync loop, which kwok lacks. A kubelet
// retries a pod status update that failed until it lands; kwok plays a pod's stage once and
// drops it when the API server answers 500, which is what it answers while etcd restarts, and the
// pod then stays Pending forever. A pod seen bound to a node and Pending for stuckAfter gets an
// annotation patch (and again every stuckAfter while it stays so): the update makes kwok play its
// stage again. The returned function waits for stop and says how many patches were sent.
func nodeAgentResync(ctx context.Context, c client.Client, stuckAfter time.Duration, stop <-chan struct{}) func() int {
	var nudged atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		since := map[string]time.Time{} // pod → first seen bound and Pending, or last nudged
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-time.After(stuckAfter / 3):
			}
			nudged.Add(int64(nudgeStuckPods(ctx, c, since, stuckAfter)))
		}
	}()
	return func() int { <-done; return int(nudged.Load()) }
}

// nudgeStuckPods patches every pod bound and Pending since at least stuckAfter; it returns how
// many it patched.
func nudgeStuckPods(ctx context.Context, c client.Client, since map[string]time.Time, stuckAfter time.Duration) int {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return 0 // the API server may be down right now; try again next period
	}
	now, n := time.Now(), 0
	stuck := map[string]time.Time{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
			continue
		}
		from, ok := since[pod.Name]
		if !ok {
			from = now
		}
		stuck[pod.Name] = from
		if now.Sub(from) < stuckAfter {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[resyncAnnotation] = now.UTC().Format(time.RFC3339Nano)
		if c.Patch(ctx, pod, patch) == nil {
			n++
			stuck[pod.Name] = now
		}
	}
	clear(since)
	for name, from := range stuck {
		since[name] = from
	}
	return n
}
