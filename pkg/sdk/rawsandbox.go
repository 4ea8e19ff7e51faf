package sdk

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// applyToSandbox applies the create options that have a meaning for a raw
// Sandbox; claim-only ones are an error.
func (cfg *createConfig) applyToSandbox(sb *agentsv1alpha1.Sandbox) error {
	if len(cfg.env) > 0 || cfg.warmPool != nil || cfg.ttlAfterFinished != nil {
		return errors.New("env, warm pool and ttlAfterFinished options apply to claims; set them in the Sandbox's pod template instead")
	}
	if err := cfg.checkHooks(); err != nil {
		return err
	}
	if cfg.name != "" {
		sb.Name = cfg.name
	}
	if cfg.generateName != "" {
		sb.GenerateName = cfg.generateName
	}
	sb.Labels = mergeMap(sb.Labels, cfg.labels)
	sb.Annotations = mergeMap(sb.Annotations, cfg.annotations)
	if cfg.egress != nil {
		if err := cfg.egress.Validate(); err != nil {
			return err
		}
		delete(sb.Annotations, agentsv1alpha1.EgressCIDRsAnnotation)
		sb.Annotations = mergeMap(sb.Annotations, cfg.egress.Annotations())
	}
	sb.Spec.PodTemplate.Metadata.Labels = mergeMap(sb.Spec.PodTemplate.Metadata.Labels, cfg.podLabels)
	sb.Spec.PodTemplate.Metadata.Annotations = mergeMap(sb.Spec.PodTemplate.Metadata.Annotations, cfg.podAnnots)
	if at := cfg.expiry(); at != nil {
		sb.Spec.ShutdownTime = at
	}
	switch cfg.shutdownPolicy {
	case "":
	case extv1alpha1.ShutdownPolicyDelete, extv1alpha1.ShutdownPolicyRetain:
		p := agentsv1alpha1.ShutdownPolicy(cfg.shutdownPolicy)
		sb.Spec.ShutdownPolicy = &p
	default:
		return fmt.Errorf("shutdown policy %q: a Sandbox supports Delete and Retain", cfg.shutdownPolicy)
	}
	if sb.Namespace == "" {
		return errors.New("no namespace")
	}
	if sb.Name == "" && sb.GenerateName == "" {
		sb.GenerateName = "sandbox-"
	}
	return nil
}

// CreateSandbox creates a Sandbox without a claim (the pod spec is the
// caller's, as in the harness flow's per-run sandboxes) and waits until it is ready,
// like Create. The namespace defaults to the client's. The object is not
// modified; the handle holds the created copy.
func (c *Client) CreateSandbox(ctx context.Context, sb *agentsv1alpha1.Sandbox, opts ...CreateOption) (*Sandbox, error) {
	cfg := newCreateConfig(opts)
	obj := sb.DeepCopy()
	if obj.Namespace == "" {
		obj.Namespace = c.ns
	}
	if err := cfg.applyToSandbox(obj); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	if err := c.kube.Create(ctx, obj); err != nil {
		return nil, kubeErr(err, "creating sandbox %s/%s", obj.Namespace, obj.Name+obj.GenerateName)
	}
	return c.finishSandbox(ctx, obj, cfg, true)
}

// GetOrCreateSandbox returns the Sandbox named sb.Name, creating it from sb
// when it does not exist, resuming it when it is paused, and waits until it
// is ready: one deterministic, persistent sandbox per workspace.
func (c *Client) GetOrCreateSandbox(ctx context.Context, sb *agentsv1alpha1.Sandbox, opts ...CreateOption) (*Sandbox, error) {
	if sb.Name == "" {
		return nil, errors.New("get-or-create sandbox: the Sandbox needs a name")
	}
	cfg := newCreateConfig(opts)
	obj := sb.DeepCopy()
	if obj.Namespace == "" {
		obj.Namespace = c.ns
	}
	if err := cfg.applyToSandbox(obj); err != nil {
		return nil, fmt.Errorf("get-or-create sandbox: %w", err)
	}
	err := c.kube.Create(ctx, obj)
	if err == nil {
		return c.finishSandbox(ctx, obj, cfg, true)
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, kubeErr(err, "creating sandbox %s/%s", obj.Namespace, obj.Name)
	}
	existing := &agentsv1alpha1.Sandbox{}
	if err := c.kube.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return nil, kubeErr(err, "reading sandbox %s/%s", obj.Namespace, obj.Name)
	}
	if cfg.egress != nil {
		if err := c.ensureEgress(ctx, existing, *cfg.egress); err != nil {
			return nil, err
		}
	}
	s := c.sandboxHandle(existing)
	if existing.DesiredReplicas() == agentsv1alpha1.PausedReplicas && !cfg.noWait {
		if err := s.Resume(ctx, waitOpt(cfg.waitConfig)); err != nil {
			return nil, err
		}
		return s, nil
	}
	return c.finishSandbox(ctx, existing, cfg, false)
}

func (c *Client) finishSandbox(ctx context.Context, sb *agentsv1alpha1.Sandbox, cfg *createConfig, created bool) (*Sandbox, error) {
	del := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name}}
	return c.finish(ctx, c.sandboxHandle(sb), del, "sandbox", cfg, created)
}
