package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// cleanupTimeout bounds the deletion of a claim whose Create failed, which
// runs on a fresh context because the caller's may be what ended.
const cleanupTimeout = 30 * time.Second

func newCreateConfig(opts []CreateOption) *createConfig {
	cfg := &createConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyCreate(cfg)
		}
	}
	return cfg
}

// buildClaim turns the options into a SandboxClaim for template.
func (c *Client) buildClaim(template string, cfg *createConfig) *extv1alpha1.SandboxClaim {
	cl := &extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   c.ns,
			Name:        cfg.name,
			Labels:      cfg.labels,
			Annotations: cfg.annotations,
		},
		Spec: extv1alpha1.SandboxClaimSpec{
			TemplateRef: extv1alpha1.SandboxTemplateRef{Name: template},
			WarmPool:    cfg.warmPool,
			Env:         cfg.env,
			AdditionalPodMetadata: agentsv1alpha1.PodMetadata{
				Labels:      cfg.podLabels,
				Annotations: cfg.podAnnots,
			},
		},
	}
	if cl.Name == "" {
		prefix := cfg.generateName
		if prefix == "" {
			prefix = template
			if len(prefix) > 40 {
				prefix = prefix[:40]
			}
			prefix = strings.TrimRight(prefix, "-.") + "-"
		}
		cl.GenerateName = prefix
	}
	if at := cfg.expiry(); at != nil || cfg.shutdownPolicy != "" || cfg.ttlAfterFinished != nil {
		cl.Spec.Lifecycle = &extv1alpha1.Lifecycle{
			ShutdownTime:            at,
			ShutdownPolicy:          cfg.shutdownPolicy,
			TTLSecondsAfterFinished: cfg.ttlAfterFinished,
		}
	}
	return cl
}

// checkClaim refuses the options a claim cannot honour.
func (cfg *createConfig) checkClaim() error {
	if cfg.egress != nil {
		return errEgressOnClaim
	}
	return cfg.checkHooks()
}

func (cfg *createConfig) expiry() *metav1.Time {
	switch {
	case cfg.shutdownTime != nil:
		t := metav1.NewTime(cfg.shutdownTime.Truncate(time.Second))
		return &t
	case cfg.ttl > 0:
		// Round up to the second the API keeps, so the TTL is never short.
		t := metav1.NewTime(time.Now().Add(cfg.ttl + time.Second - 1).Truncate(time.Second))
		return &t
	}
	return nil
}

// Create creates a SandboxClaim for template and waits (with a watch, no
// polling) until its sandbox has a pod IP and the claim's Ready condition,
// if any, is True. The claim gets a generated name unless WithName is given.
//
// Waiting ends with a *WaitError that wraps ErrTimeout after the ready
// timeout (Options.ReadyTimeout, WithReadyTimeout) or the context's
// deadline, carrying the last Ready reason and message; ErrNotFound when the
// claim is deleted meanwhile. Unless KeepOnFailure is given, a claim whose
// wait failed is deleted again. A caller that may not watch claims (403)
// waits on the claim's Sandbox instead and does not see the claim's reasons.
func (c *Client) Create(ctx context.Context, template string, opts ...CreateOption) (*Sandbox, error) {
	if template == "" {
		return nil, errors.New("create: a SandboxTemplate name is required")
	}
	cfg := newCreateConfig(opts)
	if err := cfg.checkClaim(); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	cl := c.buildClaim(template, cfg)
	if err := c.kube.Create(ctx, cl); err != nil {
		name := cl.Name
		if name == "" {
			name = cl.GenerateName + "*"
		}
		return nil, kubeErr(err, "creating sandboxclaim %s/%s", c.ns, name)
	}
	return c.finishCreate(ctx, cl, cfg, true)
}

// GetOrCreate returns the sandbox of the claim called name, creating the
// claim for template if it does not exist, and waits until it is ready. A
// deterministic name per conversation or session makes a restarted client
// reattach to the sandbox it had (session reuse). An existing claim must
// reference the same template, else the error wraps ErrTemplateMismatch;
// the options only apply when the claim is created. A claim that is being
// deleted is waited out and created anew.
func (c *Client) GetOrCreate(ctx context.Context, name, template string, opts ...CreateOption) (*Sandbox, error) {
	if name == "" || template == "" {
		return nil, errors.New("get-or-create: a claim name and a SandboxTemplate name are required")
	}
	cfg := newCreateConfig(opts)
	if err := cfg.checkClaim(); err != nil {
		return nil, fmt.Errorf("get-or-create: %w", err)
	}
	cfg.name = name
	for attempt := 0; ; attempt++ {
		cl := c.buildClaim(template, cfg)
		err := c.kube.Create(ctx, cl)
		if err == nil {
			return c.finishCreate(ctx, cl, cfg, true)
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, kubeErr(err, "creating sandboxclaim %s/%s", c.ns, name)
		}
		existing, err := c.readClaim(ctx, name)
		if err != nil {
			if apierrors.IsNotFound(err) && attempt < 3 {
				continue // deleted in between: create it
			}
			return nil, kubeErr(err, "reading sandboxclaim %s/%s", c.ns, name)
		}
		if existing.DeletionTimestamp != nil && attempt < 3 {
			if err := c.waitGone(ctx, existing, cfg.waitConfig); err != nil {
				return nil, fmt.Errorf("sandboxclaim %s/%s is being deleted: %w", c.ns, name, err)
			}
			continue
		}
		if got := existing.Spec.TemplateRef.Name; got != template {
			return nil, fmt.Errorf("sandboxclaim %s/%s references template %q, not %q: %w", c.ns, name, got, template, ErrTemplateMismatch)
		}
		return c.finishCreate(ctx, existing, cfg, false)
	}
}

// finishCreate waits for a claim unless NoWait, and cleans up a claim this
// call created when the wait fails.
func (c *Client) finishCreate(ctx context.Context, cl *extv1alpha1.SandboxClaim, cfg *createConfig, created bool) (*Sandbox, error) {
	return c.finish(ctx, c.claimHandle(cl), cl, "sandboxclaim", cfg, created)
}

// finish waits for s unless NoWait and runs the OnCreate hooks of a sandbox this call created;
// when either fails it deletes obj if this call created it (unless KeepOnFailure), so a failed
// Create leaves nothing behind.
func (c *Client) finish(ctx context.Context, s *Sandbox, obj client.Object, kind string, cfg *createConfig, created bool) (*Sandbox, error) {
	if cfg.noWait {
		return s, nil
	}
	err := s.WaitReady(ctx, waitOpt(cfg.waitConfig))
	if err == nil && created {
		err = s.runHooks(ctx, hookOnCreate, cfg.hooks)
	}
	if err == nil {
		return s, nil
	}
	if created && !cfg.keepOnFailure && !errors.Is(err, ErrNotFound) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := client.IgnoreNotFound(c.kube.Delete(dctx, obj)); derr != nil {
			err = fmt.Errorf("%w (deleting the %s afterwards failed too: %v)", err, kind, derr)
		} else {
			markDeleted(err)
		}
	}
	return nil, err
}

// waitOpt passes a whole waitConfig as one WaitOption.
type waitOpt waitConfig

func (w waitOpt) applyWait(c *waitConfig) { *c = waitConfig(w) }

// Get returns a handle on the sandbox of the claim called name, or, when no
// claim has that name, on the Sandbox called name (sandboxes created without
// a claim). It does not wait; the handle reports what the API says now.
func (c *Client) Get(ctx context.Context, name string) (*Sandbox, error) {
	cl, err := c.readClaim(ctx, name)
	if err == nil {
		return c.claimHandle(cl), nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, kubeErr(err, "reading sandboxclaim %s/%s", c.ns, name)
	}
	sb := &agentsv1alpha1.Sandbox{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, sb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no sandboxclaim or sandbox %s/%s: %w", c.ns, name, ErrNotFound)
		}
		return nil, kubeErr(err, "reading sandbox %s/%s", c.ns, name)
	}
	if claimOwned(sb) {
		// Its claim is gone; garbage collection removes it next.
		return nil, fmt.Errorf("no sandboxclaim %s/%s (its Sandbox is being deleted): %w", c.ns, name, ErrNotFound)
	}
	return c.sandboxHandle(sb), nil
}

// claimOwned reports whether a SandboxClaim controls sb: such a Sandbox is
// reached through its claim, never on its own.
func claimOwned(sb *agentsv1alpha1.Sandbox) bool {
	ref := metav1.GetControllerOf(sb)
	return ref != nil && ref.Kind == "SandboxClaim"
}

// List returns the sandboxes of the claims matching labelSelector (kubectl
// syntax, such as "team=a,tier!=prod"; "" for all), sorted by name.
func (c *Client) List(ctx context.Context, labelSelector string) ([]*Sandbox, error) {
	sel, err := labels.Parse(labelSelector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", labelSelector, err)
	}
	var list extv1alpha1.SandboxClaimList
	if err := c.kube.List(ctx, &list, client.InNamespace(c.ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, kubeErr(err, "listing sandboxclaims in %s", c.ns)
	}
	out := make([]*Sandbox, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, c.claimHandle(&list.Items[i]))
	}
	slices.SortFunc(out, func(a, b *Sandbox) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// ListSandboxes returns the Sandboxes matching labelSelector that no
// SandboxClaim controls (those created directly, such as with
// CreateSandbox), sorted by name.
func (c *Client) ListSandboxes(ctx context.Context, labelSelector string) ([]*Sandbox, error) {
	sel, err := labels.Parse(labelSelector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", labelSelector, err)
	}
	var list agentsv1alpha1.SandboxList
	if err := c.kube.List(ctx, &list, client.InNamespace(c.ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, kubeErr(err, "listing sandboxes in %s", c.ns)
	}
	var out []*Sandbox
	for i := range list.Items {
		if claimOwned(&list.Items[i]) {
			continue
		}
		out = append(out, c.sandboxHandle(&list.Items[i]))
	}
	slices.SortFunc(out, func(a, b *Sandbox) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// DeleteOption tunes Delete.
type DeleteOption struct {
	// Foreground deletes with foreground propagation: the claim stays
	// (with a deletionTimestamp) until its Sandbox and pod are gone.
	Foreground bool
	// Wait returns only once the object is gone from the API (watching).
	Wait bool
}

// Delete deletes the claim called name, which cascades to its Sandbox, pod,
// Service and volumes; when no claim has that name, the Sandbox called name.
// A name that exists as neither gives an error wrapping ErrNotFound.
func (c *Client) Delete(ctx context.Context, name string, opts ...DeleteOption) error {
	var o DeleteOption
	for _, x := range opts {
		o.Foreground = o.Foreground || x.Foreground
		o.Wait = o.Wait || x.Wait
	}
	prop := metav1.DeletePropagationBackground
	if o.Foreground {
		prop = metav1.DeletePropagationForeground
	}
	var obj client.Object = &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}}
	err := c.kube.Delete(ctx, obj, client.PropagationPolicy(prop))
	if apierrors.IsNotFound(err) {
		// No claim: a Sandbox created without one, unless a claim owns it.
		sb := &agentsv1alpha1.Sandbox{}
		if gerr := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, sb); apierrors.IsNotFound(gerr) || (gerr == nil && claimOwned(sb)) {
			return fmt.Errorf("no sandboxclaim or sandbox %s/%s: %w", c.ns, name, ErrNotFound)
		}
		obj = &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}}
		err = c.kube.Delete(ctx, obj, client.PropagationPolicy(prop))
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no sandboxclaim or sandbox %s/%s: %w", c.ns, name, ErrNotFound)
		}
	}
	if err != nil {
		return kubeErr(err, "deleting %s/%s", c.ns, name)
	}
	if o.Wait {
		err := c.kube.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if _, isClaim := obj.(*extv1alpha1.SandboxClaim); isClaim && apierrors.IsForbidden(err) {
			// Claims may be deleted but not read: wait with reads through empty patches.
			return c.waitClaimGone(ctx, name, waitConfig{})
		}
		if err != nil {
			return client.IgnoreNotFound(err)
		}
		return c.waitGone(ctx, obj, waitConfig{})
	}
	return nil
}

// waitGone watches obj until it is deleted, within the ready timeout.
func (c *Client) waitGone(ctx context.Context, obj client.Object, wc waitConfig) error {
	timeout := wc.timeout
	if timeout <= 0 {
		timeout = c.opts.ReadyTimeout
	}
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errReadyTimeout)
	defer cancel()
	var list client.ObjectList = &extv1alpha1.SandboxClaimList{}
	if _, ok := obj.(*agentsv1alpha1.Sandbox); ok {
		list = &agentsv1alpha1.SandboxList{}
	}
	rv := obj.GetResourceVersion()
	// Paces watching and reading again while the API server is away (restarting), until the
	// ready timeout.
	var retry apiBackoff
	for {
		w, err := c.kube.Watch(wctx, list.DeepCopyObject().(client.ObjectList),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}},
			client.InNamespace(obj.GetNamespace()), client.MatchingFields{"metadata.name": obj.GetName()})
		if err != nil {
			if wctx.Err() != nil {
				return ctxErr(wctx)
			}
			if _, isClaim := obj.(*extv1alpha1.SandboxClaim); isClaim && apierrors.IsForbidden(err) {
				return c.waitClaimGone(ctx, obj.GetName(), wc)
			}
			if retryableWatchError(err) && retry.wait(wctx, time.Time{}) {
				continue
			}
			if wctx.Err() != nil {
				return ctxErr(wctx)
			}
			return err
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return nil
			case watch.Added, watch.Modified:
				if o, ok := ev.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
				}
			case watch.Error:
				// Too old a version: check whether it still exists and go on.
				w.Stop()
				fresh := obj.DeepCopyObject().(client.Object)
				err := c.kube.Get(wctx, client.ObjectKeyFromObject(obj), fresh)
				switch {
				case err == nil:
					rv = fresh.GetResourceVersion()
				case apierrors.IsNotFound(err):
					return nil
				case retryableAPIError(err, false) && retry.wait(wctx, time.Time{}):
					// Still away: the next watch fails the same way and reads again.
				case wctx.Err() != nil:
					return ctxErr(wctx)
				default:
					return err
				}
			}
		}
		w.Stop()
		if wctx.Err() != nil {
			return ctxErr(wctx)
		}
	}
}

// Pause scales the sandbox of the claim (or the Sandbox) called name to zero
// replicas: its pod is deleted, its volumes and Service stay.
func (c *Client) Pause(ctx context.Context, name string, opts ...PauseOption) error {
	s, err := c.Get(ctx, name)
	if err != nil {
		return err
	}
	return s.Pause(ctx, opts...)
}

// Resume scales the sandbox of the claim (or the Sandbox) called name back
// to one replica and waits until the new pod is ready; the pod IP changes.
// OnResume hooks run then, before it returns.
func (c *Client) Resume(ctx context.Context, name string, opts ...WaitOption) (*Sandbox, error) {
	s, err := c.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := s.Resume(ctx, opts...); err != nil {
		return nil, err
	}
	return s, nil
}

// KeepAlive moves the shutdown time of the claim (or Sandbox) called name
// to now+d, so that an idle-reaping TTL only removes sandboxes nobody uses.
func (c *Client) KeepAlive(ctx context.Context, name string, d time.Duration) error {
	return c.SetShutdownTime(ctx, name, time.Now().Add(d))
}

// SetShutdownTime sets spec.lifecycle.shutdownTime of the claim called
// name (or spec.shutdownTime of the Sandbox called name, when no claim has
// that name). The zero time removes it: the sandbox no longer expires.
func (c *Client) SetShutdownTime(ctx context.Context, name string, t time.Time) error {
	s, err := c.Get(ctx, name)
	if err != nil {
		return err
	}
	return s.SetShutdownTime(ctx, t)
}

// shutdownPatch renders a merge patch setting (or, for the zero time,
// removing) a shutdownTime at path.
func shutdownPatch(t time.Time, claim bool) client.Patch {
	val := "null"
	if !t.IsZero() {
		// Round up: the API keeps whole seconds and a keep-alive must not be short.
		val = `"` + t.Add(time.Second-1).Truncate(time.Second).UTC().Format(time.RFC3339) + `"`
	}
	if claim {
		return client.RawPatch(types.MergePatchType, []byte(`{"spec":{"lifecycle":{"shutdownTime":`+val+`}}}`))
	}
	return client.RawPatch(types.MergePatchType, []byte(`{"spec":{"shutdownTime":`+val+`}}`))
}
