package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Down stops every process Up started (by recorded pid) and undoes the host changes: pods are
// deleted while the kubelet still runs (so CNI releases their addresses and netns), leftover
// containerd tasks and shims are killed, kube-proxy and cilium-agent stopped and Cilium's
// datapath removed (cilium-dbg post-uninstall-cleanup), then mounts, netns, iptables chains, the
// bridge, cgroups, bpffs and sysctls are restored. Certificates, logs and built binaries stay in
// the state dir unless purge is set, which removes it entirely.
func Down(ctx context.Context, cfg Config, purge bool) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if !fileExists(c.Dir) {
		c.progress("nothing to do: %s does not exist", c.Dir)
		return nil
	}
	var errs []error
	keep := func(err error) {
		if err != nil {
			c.Log.Warn("teardown step failed", "err", err)
			errs = append(errs, err)
		}
	}
	pvPaths := c.stopAll(ctx, keep)

	c.progress("undoing host changes")
	keep(unmountAll(c.Dir))
	hs, err := c.loadHost()
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Written before Up changes the host, removed only by a Down that restored it all.
		c.Log.Info("no host changes recorded: nothing to restore")
		hs = &hostState{}
	case err != nil:
		keep(fmt.Errorf("reading host record: %w", err))
		hs = &hostState{}
	default:
		keep(c.teardownNetwork(hs))
	}
	for _, p := range pvPaths {
		keep(os.RemoveAll(p))
	}
	for _, p := range hs.CreatedPaths {
		if strings.HasPrefix(p, "/sys/fs/cgroup/") {
			keep(removeCgroup(p))
			continue
		}
		keep(removeCreated(p))
	}
	for _, d := range []string{"etcd", "containerd", "kubelet", "kube-proxy", "cilium", "cni", "run", "pod-logs", "pids", "kwok", "images"} {
		keep(os.RemoveAll(c.path(d)))
	}
	if len(errs) > 0 {
		// Keep the host record so that another Down can finish the job.
		return errors.Join(errs...)
	}
	if err := os.Remove(c.hostStatePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		keep(err)
	}
	if purge {
		keep(os.RemoveAll(c.Dir))
	}
	if len(errs) == 0 {
		c.progress("cluster stopped and host restored")
	}
	return errors.Join(errs...)
}

// stopAll stops every process of the cluster in teardown order and removes Cilium's datapath;
// it returns the directories of hostPath volumes, to remove once nothing mounts them.
func (c *Config) stopAll(ctx context.Context, keep func(error)) (pvPaths []string) {
	// Our controllers first, so nothing recreates the pods deleted next.
	for _, n := range []string{"sandbox-router", "agent-sandbox-controller", "kwok"} {
		keep(c.stop(n))
	}
	if c.running("kube-apiserver") != nil {
		pvPaths = c.hostPathVolumes(ctx)
		// In-cluster, the controller is a pod: stop the ReplicaSets' controller, then the
		// controller's pods, so nothing recreates the pods deleted next.
		keep(c.stop("kube-controller-manager"))
		keep(c.stopInClusterController(ctx))
		if c.running("kubelet") != nil {
			c.progress("deleting pods so the kubelet tears down their containers and networks")
			keep(c.deleteAllPods(ctx))
		}
	}
	keep(c.stop("kubelet"))
	if c.running("containerd") != nil {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		keep(c.killTasks(tctx))
		cancel()
	}
	// Cilium's CNI plugin needs the agent until the last pod network is gone.
	for _, n := range []string{"containerd", "cilium-agent", "kube-proxy", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		keep(c.stop(n))
	}
	c.killShims()
	keep(c.cleanupCilium())
	return pvPaths
}

// removeCreated removes a host path the cluster created; the kubelet and containerd leave
// only their own state there, and /var/run/netns holds only mount points already released.
func removeCreated(p string) error {
	if _, err := os.Lstat(p); err != nil {
		return nil
	}
	if p == "/var/run/netns" {
		return os.Remove(p) // fails, and so keeps it, if a netns of someone else appeared
	}
	return os.RemoveAll(p)
}

// hostPathVolumes lists the directories behind the cluster's hostPath PVs (the hostpath
// provisioner makes them under /tmp/hostpath_pv), to remove once nothing mounts them.
func (c *Config) hostPathVolumes(ctx context.Context) []string {
	cs, err := c.clientset()
	if err != nil {
		return nil
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, pv := range pvs.Items {
		if hp := pv.Spec.HostPath; hp != nil && strings.HasPrefix(filepath.Clean(hp.Path), "/tmp/hostpath_pv/") {
			out = append(out, filepath.Clean(hp.Path))
		}
	}
	return out
}

// deleteAllPods deletes every pod on our node with a short grace period and waits (bounded)
// until the kubelet has confirmed them gone.
func (c *Config) deleteAllPods(ctx context.Context) error {
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + NodeName}
	pods, err := cs.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		return err
	}
	grace := int64(2)
	for _, p := range pods.Items {
		_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	return c.waitUntil(ctx, "pods to be deleted", nil, 90*time.Second, func(ctx context.Context) error {
		left, err := cs.CoreV1().Pods("").List(ctx, sel)
		if err != nil {
			return err
		}
		if n := len(left.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
}
