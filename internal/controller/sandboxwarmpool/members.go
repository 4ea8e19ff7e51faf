package sandboxwarmpool

import (
	"context"
	"sort"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
)

// membership is the pool's members sorted by what the reconcile does with them.
type membership struct {
	active  []*agentsv1beta1.Sandbox // not being deleted
	stale   []*agentsv1beta1.Sandbox // active, built from an older template revision
	edited  []*agentsv1beta1.Sandbox // active, spec changed since the pool made it
	ready   int
	pending int // creates issued but not yet in the cache
}

func (m membership) count() int { return len(m.active) + m.pending }

// surplus picks n members to remove: not-ready ones first, then the newest.
func (m membership) surplus(n int) []*agentsv1beta1.Sandbox {
	sorted := append([]*agentsv1beta1.Sandbox(nil), m.active...)
	sort.SliceStable(sorted, func(i, j int) bool {
		ri, rj := isReady(sorted[i]), isReady(sorted[j])
		if ri != rj {
			return !ri
		}
		return sorted[j].CreationTimestamp.Before(&sorted[i].CreationTimestamp)
	})
	if n > len(sorted) {
		n = len(sorted)
	}
	return sorted[:n]
}

// classify sorts the cached members; tmpl may be nil when the template is missing.
func classify(pool *extv1beta1.SandboxWarmPool, members []agentsv1beta1.Sandbox, tmpl *extv1beta1.SandboxTemplate, b blueprint.Builder, exp *memberWrites) membership {
	key := client.ObjectKeyFromObject(pool)
	pendingDeletes := exp.observe(key, members)
	var m membership
	m.pending = exp.unseenCreates(key)
	hash := ""
	if tmpl != nil {
		hash = b.Hash(tmpl)
	}
	for i := range members {
		sb := &members[i]
		if !sb.DeletionTimestamp.IsZero() || pendingDeletes[sb.UID] {
			continue
		}
		m.active = append(m.active, sb)
		if isReady(sb) {
			m.ready++
		}
		if sb.Generation > agentsv1beta1.PristineGeneration {
			// Edited since the pool made it: no claim adopts it (whatever the update strategy),
			// so it is replaced.
			m.edited = append(m.edited, sb)
		}
		if tmpl != nil && isStale(sb, pool, hash) {
			m.stale = append(m.stale, sb)
		}
	}
	return m
}

func isStale(sb *agentsv1beta1.Sandbox, pool *extv1beta1.SandboxWarmPool, hash string) bool {
	return sb.Labels[extv1beta1.TemplateHashLabel] != hash ||
		sb.Annotations[extv1beta1.TemplateRefAnnotation] != pool.Spec.TemplateRef.Name
}

func isReady(sb *agentsv1beta1.Sandbox) bool {
	return meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
}

func poolHash(pool *extv1beta1.SandboxWarmPool) string { return agentsv1beta1.NameHash(pool.Name) }

// NewMember builds an unnamed pool member from the template, a fork of the pool's prepared
// Sandbox when the pool names one.
func NewMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, b blueprint.Builder) *agentsv1beta1.Sandbox {
	sb := b.NewSandbox(tmpl)
	sb.GenerateName = pool.Name + "-"
	sb.Labels[extv1beta1.WarmPoolLabel] = poolHash(pool)
	// A snapshot pool (docs/snapshots.md): each member is a fork of the pool's prepared Sandbox,
	// so a claim gets that sandbox's processes and memory already set up.
	if source := pool.Annotations[agentsv1beta1.ForkOfAnnotation]; source != "" {
		sb.Annotations[agentsv1beta1.ForkOfAnnotation] = source
	}
	return sb
}

// createMembers creates n members in parallel (bounded) and records each as expected.
func (r *Reconciler) createMembers(ctx context.Context, pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, n int) error {
	key := client.ObjectKeyFromObject(pool)
	return forEachParallel(ctx, n, func(int) error {
		sb := NewMember(pool, tmpl, r.blueprint)
		if err := controllerutil.SetControllerReference(pool, sb, r.client.Scheme()); err != nil {
			return err
		}
		if err := r.client.Create(ctx, sb, agentsv1beta1.FieldOwner); err != nil {
			if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				r.recorder.Eventf(pool, corev1.EventTypeWarning, extv1beta1.EventSandboxCreateFailed, "creating a warm sandbox: %v", err)
			}
			return err
		}
		r.expect.created(key, sb.Name)
		log.FromContext(ctx).V(2).Info("created a warm member", "sandbox", klog.KObj(sb))
		return nil
	})
}

// deleteMembers deletes exactly the members given (UID precondition: never a claimed one that
// reused a name) and records each as expected to disappear.
func (r *Reconciler) deleteMembers(ctx context.Context, pool *extv1beta1.SandboxWarmPool, victims []*agentsv1beta1.Sandbox) error {
	key := client.ObjectKeyFromObject(pool)
	return forEachParallel(ctx, len(victims), func(i int) error {
		sb := victims[i]
		if !metav1.IsControlledBy(sb, pool) {
			return nil
		}
		// A claim may take the member over between our read and this delete: the resourceVersion
		// precondition makes the delete fail rather than remove a claimed sandbox.
		err := r.client.Delete(ctx, sb, client.Preconditions{UID: &sb.UID, ResourceVersion: &sb.ResourceVersion})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			log.FromContext(ctx).V(2).Info("member changed or gone before its delete (a claim may have taken it); kept", "sandbox", klog.KObj(sb))
			return nil
		}
		if err == nil {
			r.expect.deleted(key, sb.UID)
			log.FromContext(ctx).V(2).Info("deleted a member", "sandbox", klog.KObj(sb))
		}
		return err
	})
}

// forEachParallel runs fn for 0..n-1, at most 8 at once, and returns the first error. Once ctx
// is done it starts no more calls.
func forEachParallel(ctx context.Context, n int, fn func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
