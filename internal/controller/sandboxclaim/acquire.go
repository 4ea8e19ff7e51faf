package sandboxclaim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/metrics"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/warmqueue"
)

// maxAdoptAttempts bounds how many warm candidates one reconcile tries before a cold start.
const maxAdoptAttempts = 5

// acquire gets the claim a Sandbox: warm when the policy and the claim allow it and a ready
// member is queued, cold otherwise. It returns how the Sandbox was obtained.
func (r *Reconciler) acquire(ctx context.Context, p *pass) (*agentsv1beta1.Sandbox, launch, error) {
	claim := p.claim
	tmpl, err := r.templateOf(ctx, claim)
	if err != nil {
		return nil, launch{}, err
	}
	if err := validatePodMetadata(claim.Spec.AdditionalPodMetadata, r.blueprint.PodRules); err != nil {
		return nil, launch{}, err
	}
	// Validate env against the template before touching any warm sandbox.
	if err := checkEnv(&tmpl.Spec.PodTemplate.Spec, tmpl.Spec.EnvVarsInjectionPolicy, claim.Spec.Env); err != nil {
		return nil, launch{}, err
	}
	volumes, err := claimVolumes(claim, tmpl)
	if err != nil {
		return nil, launch{}, err
	}
	env, why := sessionEnv(tmpl, claim.Spec.Env)
	switch {
	case claim.Annotations[agentsv1beta1.ForkOfAnnotation] != "":
		// A fork starts from its parent's memory, not from a pod already running.
		why = "the claim forks Sandbox " + claim.Annotations[agentsv1beta1.ForkOfAnnotation]
	case claim.EffectiveWarmPool() == extv1beta1.WarmPoolPolicyNone:
		why = "the claim's warmpool is none"
	case volumes != nil:
		// Volumes are part of the pod, which a running warm pod cannot take on.
		why = "the claim brings its own volumes"
	case why == "":
		sb, pool, err := r.adopt(ctx, claim, tmpl, env)
		if l := log.FromContext(ctx).V(2); sb != nil && l.Enabled() {
			// Names only: the values of the session env are the claim's secrets. Guarded: the
			// sorted names would cost every warm claim an allocation at the default verbosity.
			l.Info("adopted a warm sandbox", "sandbox", klog.KObj(sb),
				"pool", klog.KRef(claim.Namespace, pool), "template", tmpl.Name, "sessionEnv", slices.Sorted(maps.Keys(env)))
		}
		if sb != nil {
			r.countServed(claim.Namespace, pool)
		}
		if err != nil || sb != nil {
			return sb, launch{kind: extv1beta1.LaunchTypeWarm, pool: pool}, err
		}
		why = "no warm sandbox of the template was ready"
		r.countMissed(ctx, claim, tmpl.Name)
	}
	r.warnIfPoolMissing(ctx, p)
	sb, err := r.createCold(ctx, p, tmpl, volumes, why)
	return sb, launch{kind: extv1beta1.LaunchTypeCold, pool: namedPool(claim)}, err
}

// launch is how a claim got its Sandbox: its kind (warm or cold) and the warm pool it came from
// or asked for.
type launch struct{ kind, pool string }

// namedPool is the one warm pool the claim asks for, or "".
func namedPool(claim *extv1beta1.SandboxClaim) string {
	switch policy := claim.EffectiveWarmPool(); policy {
	case extv1beta1.WarmPoolPolicyNone, extv1beta1.WarmPoolPolicyDefault:
		return ""
	default:
		return string(policy)
	}
}

// warnIfPoolMissing tells the user when the warm pool a claim names does not exist, so a typo
// does not silently turn every claim into a cold start.
func (r *Reconciler) warnIfPoolMissing(ctx context.Context, p *pass) {
	claim := p.claim
	policy := claim.EffectiveWarmPool()
	if policy == extv1beta1.WarmPoolPolicyNone || policy == extv1beta1.WarmPoolPolicyDefault {
		return
	}
	pool := &extv1beta1.SandboxWarmPool{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: string(policy)}, pool); apierrors.IsNotFound(err) {
		p.event(corev1.EventTypeWarning, extv1beta1.ReasonWarmPoolNotFound,
			"SandboxWarmPool %q not found; starting a Sandbox from the template instead", policy)
	}
}

// adopt takes over a ready warm Sandbox: one optimistic-locked patch moves its ownership to the
// claim. It returns nil when no candidate could be taken, else the Sandbox and its pool's name.
func (r *Reconciler) adopt(ctx context.Context, claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate,
	env map[string]string) (*agentsv1beta1.Sandbox, string, error) {
	accept := r.acceptFor(ctx, claim, r.blueprint.Hash(tmpl))
	for attempt := 0; attempt < maxAdoptAttempts; attempt++ {
		cand, ok := r.queue.Pop(claim.Namespace, tmpl.Name, accept)
		if !ok {
			return nil, "", nil
		}
		sb := &agentsv1beta1.Sandbox{}
		if err := r.client.Get(ctx, cand.Name, sb); err != nil || !adoptable(sb) {
			continue
		}
		err := r.takeOver(ctx, claim, sb, env)
		if apierrors.IsConflict(err) {
			// Our cached copy was stale (e.g. a status write); retry once on the live object
			// unless someone else took it.
			if err = r.apiReader.Get(ctx, cand.Name, sb); err != nil || !adoptable(sb) {
				continue
			}
			err = r.takeOver(ctx, claim, sb, env)
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			log.FromContext(ctx).V(3).Info("warm candidate taken or gone; trying the next", "sandbox", klog.KRef(cand.Name.Namespace, cand.Name.Name))
			continue
		}
		if err != nil {
			// The member did not change, so no watch event will queue it again: put it back, or
			// it sits idle in its pool until the next resync.
			r.queue.Offer(cand)
			return nil, "", err
		}
		// No Event here: on the hot path every write counts against the API server, and the
		// adoption is visible in status.sandbox.name and the launch-type label.
		return sb, cand.Pool, nil
	}
	log.FromContext(ctx).V(2).Info("no warm sandbox could be adopted; starting cold", "attempts", maxAdoptAttempts)
	return nil, "", nil
}

// acceptFor filters queued candidates by the claim's warmpool policy, and skips stale members
// of Recreate pools (their pool is replacing them).
func (r *Reconciler) acceptFor(ctx context.Context, claim *extv1beta1.SandboxClaim, hash string) func(warmqueue.Candidate) bool {
	policy := claim.EffectiveWarmPool()
	return func(c warmqueue.Candidate) bool {
		if policy != extv1beta1.WarmPoolPolicyDefault && c.Pool != string(policy) {
			return false
		}
		if c.TemplateHash == hash {
			return true
		}
		pool := &extv1beta1.SandboxWarmPool{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: c.Pool}, pool); err != nil {
			return false
		}
		return pool.EffectiveUpdateStrategy() != extv1beta1.RecreateSandboxWarmPoolUpdateStrategyType
	}
}

// adoptable: an unclaimed, ready pool member whose spec is still the one its pool made
// (generation 1: no spec write since the create, by anyone), so a member edited before its
// adoption is never handed to someone else; its pool replaces it. The owner is told by group
// and kind: members made before the upgrade to v1beta1 storage name their pool in v1alpha1.
func adoptable(sb *agentsv1beta1.Sandbox) bool {
	owner := metav1.GetControllerOf(sb)
	return sb.DeletionTimestamp.IsZero() && owner != nil && sb.Generation <= agentsv1beta1.PristineGeneration &&
		owner.Kind == "SandboxWarmPool" && index.IsClaimOrPool(owner) &&
		meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) &&
		len(sb.Status.PodIPs) > 0
}

// takeOver is the whole adoption: ownership, labels and annotations (the claim's env among
// them) in one optimistic-locked merge patch. Only metadata changes (unless the claim adds pod
// metadata), so the Sandbox keeps its generation and its pod keeps running untouched.
func (r *Reconciler) takeOver(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, env map[string]string) error {
	patched := sb.DeepCopy()
	delete(patched.Labels, extv1beta1.WarmPoolLabel)
	stampClaim(patched, claim, extv1beta1.LaunchTypeWarm)
	if err := setSessionEnv(patched, env); err != nil {
		return err
	}
	patched.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	mergePodMetadata(&patched.Spec.PodTemplate.ObjectMeta, claim.Spec.AdditionalPodMetadata)
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(sb, client.MergeFromWithOptimisticLock{}), agentsv1beta1.FieldOwner); err != nil {
		return err
	}
	*sb = *patched
	return nil
}

// createCold builds the claim's own Sandbox from the template, named after the claim, with the
// claim's volumes when it brings its own; why (the claim could not be served warm) goes in the
// event.
func (r *Reconciler) createCold(ctx context.Context, p *pass, tmpl *extv1beta1.SandboxTemplate,
	volumes []agentsv1beta1.PersistentVolumeClaimTemplate, why string) (*agentsv1beta1.Sandbox, error) {
	claim := p.claim
	sb := r.blueprint.NewSandbox(tmpl)
	if volumes != nil {
		sb.Spec.VolumeClaimTemplates = volumes
	}
	sb.Name = claim.Name
	stampClaim(sb, claim, extv1beta1.LaunchTypeCold)
	if parent := claim.Annotations[agentsv1beta1.ForkOfAnnotation]; parent != "" {
		// The one agents.x-k8s.io/ annotation a claim passes on; admission let its author name
		// only a Sandbox it may run code in (docs/snapshots.md, "Fork").
		sb.Annotations[agentsv1beta1.ForkOfAnnotation] = parent
	}
	if _, err := injectEnv(&sb.Spec.PodTemplate.Spec, tmpl.Spec.EnvVarsInjectionPolicy, claim.Spec.Env); err != nil {
		return nil, err
	}
	mergePodMetadata(&sb.Spec.PodTemplate.ObjectMeta, claim.Spec.AdditionalPodMetadata)
	if err := controllerutil.SetControllerReference(claim, sb, r.client.Scheme()); err != nil {
		return nil, err
	}
	err := r.client.Create(ctx, sb, agentsv1beta1.FieldOwner)
	if apierrors.IsAlreadyExists(err) {
		existing := &agentsv1beta1.Sandbox{}
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(sb), existing); err != nil {
			return nil, err
		}
		if !ownedBy(existing, claim) {
			log.FromContext(ctx).V(2).Info("a sandbox of the claim's name belongs to someone else", "sandbox", klog.KObj(existing))
			return nil, &userError{extv1beta1.ReasonSandboxNotOwned,
				fmt.Sprintf("a Sandbox named %q exists and is not owned by this claim; delete it or use another claim name", sb.Name)}
		}
		log.FromContext(ctx).V(2).Info("took over the sandbox an earlier cold create made", "sandbox", klog.KObj(existing))
		return existing, nil
	}
	if err != nil {
		return nil, err
	}
	// Names only: the values of the claim's env are its secrets.
	log.FromContext(ctx).V(2).Info("created a sandbox from the template (cold start)", "sandbox", klog.KObj(sb),
		"template", tmpl.Name, "why", why, "env", envNames(claim.Spec.Env), "ownVolumes", volumes != nil)
	p.event(corev1.EventTypeNormal, extv1beta1.EventSandboxProvisioned, "Created Sandbox %q from template %q (cold: %s)", sb.Name, tmpl.Name, why)
	return sb, nil
}

// envNames lists the names of the claim's env, for logs, which never carry the values.
func envNames(env []extv1beta1.EnvVar) []string {
	names := make([]string, 0, len(env))
	for _, e := range env {
		names = append(names, e.Name)
	}
	return names
}

// stampClaim marks a Sandbox as the claim's and copies the claim's own labels and annotations,
// so tenants can query Sandboxes by the labels they put on claims.
func stampClaim(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim, launch string) {
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	for k, v := range claim.Labels {
		if !systemKey(k) {
			sb.Labels[k] = v
		}
	}
	for k, v := range claim.Annotations {
		if (!systemKey(k) || slices.Contains(agentsv1beta1.IdleAnnotations, k)) && k != corev1.LastAppliedConfigAnnotation {
			sb.Annotations[k] = v
		}
	}
	sb.Labels[extv1beta1.ClaimUIDLabel] = string(claim.UID)
	sb.Labels[extv1beta1.LaunchTypeLabel] = launch
	// Which kind of client made the claim, for agent_sandboxes{created_by}; it rides on the
	// write that binds the Sandbox anyway.
	if by, ok := claim.Labels[metrics.CreatedByLabel]; ok {
		sb.Labels[metrics.CreatedByLabel] = metrics.NormalizeCreatedBy(by)
	}
}

// ownedBy: controlled by the claim, through a reference of the claim's own kind (a forged
// reference of another kind may carry the claim's UID).
func ownedBy(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) bool {
	ref := metav1.GetControllerOf(sb)
	return metav1.IsControlledBy(sb, claim) && ref.Kind == "SandboxClaim" && index.IsClaimOrPool(ref)
}

// systemKey reports keys reserved for the controllers.
func systemKey(k string) bool {
	return strings.HasPrefix(k, "agents.x-k8s.io/") || strings.HasPrefix(k, "extensions.agents.x-k8s.io/")
}
