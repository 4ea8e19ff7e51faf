package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

var intstr8888 = intstr.FromInt32(8888)

// newKubeClient is a client for core kinds and ours; the SDK's own client knows only ours.
func newKubeClient(cli *sdk.Client) (client.Client, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1alpha1.AddToScheme, extv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return client.New(cli.RESTConfig(), client.Options{Scheme: s})
}

// upsert creates obj with mutate applied, or updates the existing one to it (retrying on
// conflicts), so the demo can run again and again.
func upsert(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	key := client.ObjectKeyFromObject(obj)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err):
			mutate()
			err = c.Create(ctx, obj)
		case err == nil:
			mutate()
			err = c.Update(ctx, obj)
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// waitPool waits until the named warm pool reports all its replicas ready, saying how far it is.
func waitPool(ctx context.Context, c client.Client, name string, out io.Writer) error {
	pool := &extv1alpha1.SandboxWarmPool{}
	last := int32(-1)
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: demoNS, Name: name}, pool); err != nil {
			return false, err
		}
		if r := pool.Status.ReadyReplicas; r != last {
			fmt.Fprintf(out, "    warm pool: %d/%d ready\n", r, pool.Spec.Replicas)
			last = r
		}
		return pool.Status.ReadyReplicas >= pool.Spec.Replicas, nil
	})
}

// podOf reads the sandbox's pod.
func podOf(ctx context.Context, c client.Client, ns, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	return pod, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)
}

// waitPaused waits until the Sandbox has no pod any more (status.replicas 0, not Ready): the
// scale-down itself returns as soon as spec.replicas is written.
func waitPaused(ctx context.Context, c client.Client, ns, name string) error {
	sb := &agentsv1alpha1.Sandbox{}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sb); err != nil {
			return false, err
		}
		return sb.Status.Replicas == 0 && !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady), nil
	})
}

// untilRouted returns once the router routes to the sandbox. The SDK reports ready from its
// own watch of the API; the router's watch cache can be a few milliseconds behind and answer
// 503 (not ready) in that window.
func untilRouted(ctx context.Context, sb *sdk.Sandbox) error {
	var err error
	for i := 0; i < 50; i++ {
		if _, err = sb.Run(ctx, sdk.Argv("true")); !errors.Is(err, sdk.ErrNotReady) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}
