package components

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostpathprov"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// drainStep tears the node's workload down before the node stops: with the API server up it stops
// kube-controller-manager (so nothing recreates pods), deletes the controller's pods, then every
// pod while the kubelet still runs (so CNI releases their addresses and namespaces, with Cilium's
// agent still running for its plugin); then it stops the kubelet, kills the containerd tasks
// left and stops containerd, and removes the hostPath volumes' directories. Up does nothing.
type drainStep struct{ env Env }

func (drainStep) Name() string { return "drain" }

func (drainStep) Up(context.Context) error { return nil }

func (s drainStep) Down(ctx context.Context) error {
	c := s.env
	var errs []error
	var pvPaths []string
	if c.Proc.Running("kube-apiserver") != nil {
		pvPaths = hostPathVolumes(ctx, c)
		errs = append(errs, c.Proc.Stop("kube-controller-manager"), stopInClusterController(ctx, c))
		if c.Proc.Running("kubelet") != nil {
			c.Cfg.Progress("deleting pods so the kubelet tears down their containers and networks")
			errs = append(errs, deleteAllPods(ctx, c))
		}
	}
	errs = append(errs, c.Proc.Stop("kubelet"))
	if c.Proc.Running("containerd") != nil {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		errs = append(errs, killTasks(tctx, c))
		cancel()
	}
	errs = append(errs, c.Proc.Stop("containerd"))
	for _, p := range pvPaths {
		errs = append(errs, c.Host.RemoveAll(p))
	}
	return errors.Join(errs...)
}

// hostPathVolumes lists the directories behind the cluster's hostPath PVs (the hostpath
// provisioner makes them under hostpathprov.DefaultRoot), to remove once nothing uses them.
func hostPathVolumes(ctx context.Context, e Env) []string {
	cs, err := kube.Clientset(e.Cfg.KubeconfigPath())
	if err != nil {
		return nil
	}
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, pv := range pvs.Items {
		if hp := pv.Spec.HostPath; hp != nil && strings.HasPrefix(filepath.Clean(hp.Path), hostpathprov.DefaultRoot+"/") {
			out = append(out, filepath.Clean(hp.Path))
		}
	}
	return out
}

// deleteAllPods deletes every pod on our node with a short grace period and waits (bounded)
// until the kubelet has confirmed them gone.
func deleteAllPods(ctx context.Context, e Env) error {
	cs, err := kube.Clientset(e.Cfg.KubeconfigPath())
	if err != nil {
		return err
	}
	sel := metav1.ListOptions{FieldSelector: "spec.nodeName=" + spec.NodeName}
	pods, err := cs.CoreV1().Pods("").List(ctx, sel)
	if err != nil {
		return err
	}
	grace := int64(2)
	for _, p := range pods.Items {
		_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	return e.Proc.WaitUntil(ctx, "pods to be deleted", nil, 90*time.Second, func(ctx context.Context) error {
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
