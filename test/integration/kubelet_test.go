package integration

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// startFakeKubelet plays the kubelet for every pod of the namespace: it reports each new pod
// Running and Ready with a unique IP, as a node would once the container started.
func startFakeKubelet(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ipSeq atomic.Int32
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			pods := &corev1.PodList{}
			if err := k8s.List(ctx, pods, client.InNamespace(ns)); err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.Status.Phase != corev1.PodPending || len(p.Status.Conditions) > 0 || !p.DeletionTimestamp.IsZero() {
						continue
					}
					n := ipSeq.Add(1)
					now := metav1.Now()
					p.Status = corev1.PodStatus{
						Phase: corev1.PodRunning,
						Conditions: []corev1.PodCondition{
							{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
							{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
						},
						PodIP:  fmt.Sprintf("10.%d.%d.%d", 200, n/250, n%250+1),
						PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", 200, n/250, n%250+1)}},
					}
					_ = k8s.Status().Update(ctx, p)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}
