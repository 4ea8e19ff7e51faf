package sdk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// ErrForkedCold is a fork that is ready but did not get its parent's memory (the parent is not on
// gVisor, the node agent is not installed, the node's disk is full...). The Sandbox's
// MemoryKept condition says why; the fork is left running.
var ErrForkedCold = errors.New("forked without the parent's memory")

// maxForks bounds one Fork: each child is a pod on the parent's node.
const maxForks = 32

// Fork makes n new Sandboxes from the running sandbox called name (a claim or a Sandbox): each
// starts with the parent's processes and memory, restored on the parent's node, under its own
// name, address and network policy (docs/snapshots.md, "Fork"). The parent keeps running. The
// children are raw Sandboxes named <parent>-fork-<random>, with the parent's pod template and
// volume templates (their volumes are new and empty); CreateOption labels, annotations,
// expiry and wait options apply to each. Fork waits until every child is ready and returns
// them in order; a child that started cold is returned too, with an error wrapping
// ErrForkedCold. When a child cannot be created or made ready, the ones made are deleted
// (unless KeepOnFailure).
func (c *Client) Fork(ctx context.Context, name string, n int, opts ...CreateOption) ([]*Sandbox, error) {
	if n < 1 || n > maxForks {
		return nil, fmt.Errorf("fork %s: %d forks; ask for 1 to %d", name, n, maxForks)
	}
	parent, err := c.forkParent(ctx, name)
	if err != nil {
		return nil, err
	}
	cfg := newCreateConfig(opts)
	children := make([]*agentsv1alpha1.Sandbox, 0, n)
	for range n {
		child := forkOf(parent)
		if err := cfg.applyToSandbox(child); err != nil {
			return nil, fmt.Errorf("fork %s: %w", name, err)
		}
		if err := c.kube.Create(ctx, child); err != nil {
			return nil, c.forkFailed(ctx, cfg, children, kubeErr(err, "creating a fork of %s/%s", parent.Namespace, parent.Name))
		}
		children = append(children, child)
	}
	if cfg.noWait {
		return c.forkHandles(children), nil
	}
	handles := c.forkHandles(children)
	var cold []error
	for _, h := range handles {
		if err := h.WaitReady(ctx, waitOpt(cfg.waitConfig)); err != nil {
			return nil, c.forkFailed(ctx, cfg, children, err)
		}
		if err := c.forkGotMemory(ctx, h); err != nil {
			cold = append(cold, err)
		}
	}
	return handles, errors.Join(cold...)
}

// forkParent reads the running Sandbox behind name.
func (c *Client) forkParent(ctx context.Context, name string) (*agentsv1alpha1.Sandbox, error) {
	s, err := c.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", name, err)
	}
	parent := &agentsv1alpha1.Sandbox{}
	key := client.ObjectKey{Namespace: s.ns, Name: s.sandboxObjectName()}
	if err := c.kube.Get(ctx, key, parent); err != nil {
		return nil, kubeErr(err, "reading sandbox %s/%s", key.Namespace, key.Name)
	}
	if parent.DesiredReplicas() == agentsv1alpha1.PausedReplicas {
		return nil, fmt.Errorf("fork %s: it is paused; only a running sandbox is forked: %w", name, ErrNotReady)
	}
	return parent, nil
}

// forkOf is a child of parent: its pod template and volume templates, none of what the
// controller or an admin gave the parent (the controller's agents.x-k8s.io/ pod labels and
// annotations, a memory image), nor its lifecycle.
func forkOf(parent *agentsv1alpha1.Sandbox) *agentsv1alpha1.Sandbox {
	child := &agentsv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: parent.Namespace, GenerateName: parent.Name + "-fork-",
			Annotations: map[string]string{agentsv1alpha1.ForkOfAnnotation: parent.Name}},
	}
	child.Spec.PodTemplate = *parent.Spec.PodTemplate.DeepCopy()
	child.Spec.VolumeClaimTemplates = parent.DeepCopy().Spec.VolumeClaimTemplates
	meta := &child.Spec.PodTemplate.Metadata
	meta.Labels = withoutControllerKeys(meta.Labels)
	meta.Annotations = withoutControllerKeys(meta.Annotations)
	if mode, ok := parent.Annotations[agentsv1alpha1.PauseModeAnnotation]; ok {
		child.Annotations[agentsv1alpha1.PauseModeAnnotation] = mode
	}
	return child
}

// withoutControllerKeys drops the keys only the controller writes (admission refuses them to a
// tenant), keeping the pause mode a template asked for.
func withoutControllerKeys(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		controllers := strings.HasPrefix(k, "agents.x-k8s.io/") || k == agentsv1alpha1.RestoreImageAnnotation
		if !controllers || k == agentsv1alpha1.PauseModeAnnotation {
			out[k] = v
		}
	}
	return out
}

func (c *Client) forkHandles(children []*agentsv1alpha1.Sandbox) []*Sandbox {
	out := make([]*Sandbox, len(children))
	for i, child := range children {
		out[i] = c.sandboxHandle(child)
	}
	return out
}

// forkGotMemory says, once a fork is ready, whether its pod was restored from its parent.
func (c *Client) forkGotMemory(ctx context.Context, h *Sandbox) error {
	sb := &agentsv1alpha1.Sandbox{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: h.name}, sb); err != nil {
		return kubeErr(err, "reading fork %s/%s", h.ns, h.name)
	}
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionMemoryKept)
	if cond != nil && cond.Reason == agentsv1alpha1.ReasonMemoryRestored {
		return nil
	}
	why := "no MemoryKept condition: is the node agent installed?"
	if cond != nil {
		why = cond.Reason + ": " + cond.Message
	}
	return fmt.Errorf("fork %s/%s: %w (%s)", h.ns, h.name, ErrForkedCold, why)
}

// forkFailed deletes the forks made so far, unless the caller keeps them.
func (c *Client) forkFailed(ctx context.Context, cfg *createConfig, made []*agentsv1alpha1.Sandbox, err error) error {
	if cfg.keepOnFailure {
		return err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, sb := range made {
		if derr := client.IgnoreNotFound(c.kube.Delete(dctx, sb)); derr != nil {
			err = fmt.Errorf("%w (deleting fork %s afterwards failed too: %v)", err, sb.Name, derr)
		}
	}
	return err
}
