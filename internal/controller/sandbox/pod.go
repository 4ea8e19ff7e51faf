package sandbox

import (
	"context"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
)

// Pod annotations recording which template keys the controller put on the pod, so that keys
// dropped from the template (for example a warm pool's label after adoption) are removed again
// without touching keys others added.
const (
	propagatedLabelsAnnotation      = "agents.x-k8s.io/propagated-labels"
	propagatedAnnotationsAnnotation = "agents.x-k8s.io/propagated-annotations"
)

// mirroredSandboxLabels are Sandbox labels copied to its pod.
var mirroredSandboxLabels = []string{
	extv1beta1.WarmPoolLabel,
	extv1beta1.ClaimUIDLabel,
}

// reconcilePod makes the owned pod exist (or not, when paused) and keeps its metadata in line
// with the template. It returns the owned pod (nil when none) and whether a same-named pod that
// this Sandbox does not control is in the way; such a pod is never touched. With mayCreate
// false a missing pod stays missing (an existing one is kept). A metadata update held back by
// the gate is reported in retryAfter.
func (r *Reconciler) reconcilePod(ctx context.Context, sb *agentsv1beta1.Sandbox, mayCreate bool) (pod *corev1.Pod, notOwned bool, retryAfter time.Duration, err error) {
	pod, notOwned, err = r.getPod(ctx, sb)
	if err != nil || notOwned {
		return nil, notOwned, 0, err
	}
	key := client.ObjectKeyFromObject(sb)
	if pod != nil {
		r.createdPods.Observed(key, sb.UID) // the cache shows our create
	}

	if sb.DesiredReplicas() == agentsv1beta1.PausedReplicas {
		r.createdPods.Forget(key)
		if pod != nil && pod.DeletionTimestamp.IsZero() {
			if err := r.saveMemory(ctx, sb, pod); err != nil {
				return pod, false, 0, err
			}
			log.FromContext(ctx).V(2).Info("paused (replicas 0): deleting the pod", "pod", klog.KObj(pod), "idlePaused", idlePaused(sb) != "")
			if err := r.deletePod(ctx, pod); err != nil {
				return pod, false, 0, err
			}
		}
		saidSaved(sb)
		return pod, false, 0, nil
	}

	if pod != nil {
		if !pod.DeletionTimestamp.IsZero() {
			// Resume right after a pause: the old pod must be gone before its name can be reused;
			// its deletion event brings us back.
			log.FromContext(ctx).V(2).Info("resuming: waiting for the old pod to go", "pod", klog.KObj(pod))
			return pod, false, 0, nil
		}
		saidForkSaved(sb)
		if err := r.finishRestore(ctx, sb, pod); err != nil {
			return pod, false, 0, err
		}
		retryAfter, err = r.syncPodMetadata(ctx, sb, pod)
		return pod, false, retryAfter, err
	}
	if !mayCreate {
		log.FromContext(ctx).V(2).Info("no pod until the sandbox's NetworkPolicy is in place")
		return nil, false, 0, nil
	}
	if mine, ok := r.createdPods.Get(key, sb.UID); ok {
		// Created moments ago and not in the cache yet (another child's event came first):
		// creating it again would only earn an AlreadyExists.
		return mine.DeepCopy(), false, 0, nil
	}

	pod, refused := buildPod(sb, r.podRules, r.hardening)
	if err := controllerutil.SetControllerReference(sb, pod, r.client.Scheme()); err != nil {
		return nil, false, 0, err
	}
	r.warnRefused(sb, refused)
	if err := r.saveParent(ctx, sb); err != nil {
		return nil, false, 0, err
	}
	if err := r.restoreInto(ctx, sb, pod); err != nil {
		return nil, false, 0, err
	}
	if err := r.client.Create(ctx, pod, agentsv1beta1.FieldOwner); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, 0, err
		}
		// The cache holds only tracked pods; look at the one in the way directly. Ours without
		// its tracking label (someone edited it) gets its labels back.
		pod, notOwned, err = r.getPodLive(ctx, sb)
		if err != nil || pod == nil || notOwned {
			return pod, notOwned, 0, err
		}
		retryAfter, err = r.syncPodMetadata(ctx, sb, pod)
		return pod, false, retryAfter, err
	}
	r.createdPods.Expect(key, sb.UID, pod.DeepCopy())
	log.FromContext(ctx).V(2).Info("created the pod", "pod", klog.KObj(pod))
	if err := r.restorePodMade(ctx, sb, pod); err != nil {
		return pod, false, 0, err
	}
	return pod, false, 0, nil
}

// getPod reads the sandbox's pod from the cache.
func (r *Reconciler) getPod(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Pod, bool, error) {
	pod := &corev1.Pod{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}, pod)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !metav1.IsControlledBy(pod, sb) {
		return nil, true, nil
	}
	return pod, false, nil
}

func (r *Reconciler) getPodLive(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Pod, bool, error) {
	pod := &corev1.Pod{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}, pod)
	if err != nil {
		// Gone in between: the next reconcile creates it.
		return nil, false, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(pod, sb) {
		return nil, true, nil
	}
	return pod, false, nil
}

// deletePod deletes exactly the pod we saw, never a newer one with the same name.
func (r *Reconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// warnRefused tells the Sandbox's owner which pod labels were left out because they would make
// the pod look like the router.
func (r *Reconciler) warnRefused(sb *agentsv1beta1.Sandbox, refused []string) {
	if len(refused) > 0 {
		r.recorder.Eventf(sb, corev1.EventTypeWarning, agentsv1beta1.EventRouterLabelsRefused,
			"pod labels %s identify the sandbox router and were not applied to the pod", strings.Join(refused, ", "))
	}
}

func buildPod(sb *agentsv1beta1.Sandbox, rules podmeta.Rules, hardening blueprint.Builder) (*corev1.Pod, []string) {
	labels, annotations, refused := podMetadata(sb, rules)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        sb.Name,
			Namespace:   sb.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
	withClaimVolumes(&pod.Spec, sb)
	// Hardened on every pod made, so neither a raw Sandbox nor one edited since it was made from
	// its template escapes the defaults (a template's Sandbox has them already).
	hardening.HardenPod(&pod.Spec, sb.Annotations[extv1beta1.TemplateRefAnnotation] != "")
	// automountServiceAccountToken is left as the Sandbox says: the contract defaults it to false
	// only for pods made from a SandboxTemplate (blueprint does that), and a raw Sandbox keeps
	// Kubernetes' default, as upstream's does.
	return pod, refused
}

// podMetadata is the labels and annotations the pod must carry: the template's, the tracking
// labels and agents.x-k8s.io/sandbox=true (which the template cannot override), and the bookkeeping of propagated keys. Template
// labels that would make the pod look like the router are left out and returned: whoever can
// write a Sandbox (or patch one, as some tenants may) must not be able to open other sandboxes'
// NetworkPolicies to it.
func podMetadata(sb *agentsv1beta1.Sandbox, rules podmeta.Rules) (map[string]string, map[string]string, []string) {
	tmpl := sb.Spec.PodTemplate.ObjectMeta
	tmplLabels, refused := rules.WithoutRouterLabels(tmpl.Labels)
	propagated := map[string]string{}
	for k, v := range tmplLabels {
		propagated[k] = v
	}
	// Pool membership and claim identity live in the Sandbox's own labels so that adopting a
	// warm Sandbox changes only its metadata (no new generation, no status rewrite); they are
	// mirrored onto the pod so the pool's selector and per-claim queries find it.
	for _, k := range mirroredSandboxLabels {
		if v, ok := sb.Labels[k]; ok {
			propagated[k] = v
		}
	}
	labels := map[string]string{}
	for k, v := range propagated {
		labels[k] = v
	}
	for k, v := range podIdentityLabels(sb) {
		labels[k] = v
	}
	annotations := map[string]string{}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	if keys := sortedKeys(propagated); keys != "" {
		annotations[propagatedLabelsAnnotation] = keys
	}
	if keys := sortedKeys(tmpl.Annotations); keys != "" {
		annotations[propagatedAnnotationsAnnotation] = keys
	}
	return labels, annotations, refused
}

// syncPodMetadata applies template label/annotation changes to a running pod with one merge
// patch. The pod spec is left alone: changing it would need a restart, which a stateful
// sandbox must not get behind its user's back.
// While the gate holds background writes back it hands the Sandbox to the gate's release, or
// returns how long until it may try again when nothing releases it.
func (r *Reconciler) syncPodMetadata(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) (retryAfter time.Duration, err error) {
	wantLabels, wantAnnotations, refused := podMetadata(sb, r.podRules)
	updated := pod.DeepCopy()
	updated.Labels = mergeTracked(pod.Labels, wantLabels, splitKeys(pod.Annotations[propagatedLabelsAnnotation]))
	updated.Labels = r.withoutForeignReserved(updated.Labels, wantLabels)
	prevAnnotations := splitKeys(pod.Annotations[propagatedAnnotationsAnnotation])
	prevAnnotations = append(prevAnnotations, propagatedLabelsAnnotation, propagatedAnnotationsAnnotation)
	updated.Annotations = mergeTracked(pod.Annotations, wantAnnotations, prevAnnotations)
	if equality.Semantic.DeepEqual(pod.Labels, updated.Labels) && equality.Semantic.DeepEqual(pod.Annotations, updated.Annotations) {
		return 0, nil
	}
	if !r.escapesIsolation(sb, pod.Labels, wantLabels) {
		if wait := r.gate.Wait(); wait > 0 {
			// Labels are bookkeeping, not readiness: during a claim burst this write waits, so
			// the API server spends its CPU on the claims themselves. The gate wakes this
			// Sandbox when it opens; without its release running, come back after wait.
			if r.gate.Hold(client.ObjectKeyFromObject(sb)) {
				return 0, nil
			}
			return wait, nil
		}
	}
	r.warnRefused(sb, refused)
	if err := r.client.Patch(ctx, updated, client.MergeFrom(pod), agentsv1beta1.FieldOwner); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	*pod = *updated
	return 0, nil
}

// escapesIsolation reports whether the pod's labels, as someone patched them, take it out of its
// Sandbox's NetworkPolicy (a tracking label gone or changed) or make it pose as the router (which
// other sandboxes' policies admit). Taking those back is isolation, not bookkeeping: it never
// waits for a claim burst to end.
func (r *Reconciler) escapesIsolation(sb *agentsv1beta1.Sandbox, have, want map[string]string) bool {
	for k, v := range trackingLabels(sb) {
		if got, ok := have[k]; !ok || got != v {
			return true
		}
	}
	for k, v := range have {
		if _, wanted := want[k]; !wanted && r.podRules.PosesAsRouter(k, v) {
			return true
		}
	}
	return false
}

// withoutForeignReserved drops the labels only the controller may put on a sandbox pod and that
// it does not want there (someone patched the pod): keys of the agents.x-k8s.io domain, which
// Services, NetworkPolicies and pools select on, and the router's identity, which other
// sandboxes' policies admit.
func (r *Reconciler) withoutForeignReserved(labels, want map[string]string) map[string]string {
	for k, v := range labels {
		if _, wanted := want[k]; wanted {
			continue
		}
		domain, _, _ := strings.Cut(k, "/")
		if domain == agentsDomain || strings.HasSuffix(domain, "."+agentsDomain) || r.podRules.PosesAsRouter(k, v) {
			delete(labels, k)
		}
	}
	if len(labels) == 0 {
		return nil
	}
	return labels
}

// agentsDomain is the label domain of this system.
const agentsDomain = "agents.x-k8s.io"

// mergeTracked returns current with previously propagated keys that are no longer wanted
// removed and every wanted key set.
func mergeTracked(current, want map[string]string, previouslyPropagated []string) map[string]string {
	out := make(map[string]string, len(current)+len(want))
	for k, v := range current {
		out[k] = v
	}
	for _, k := range previouslyPropagated {
		if _, keep := want[k]; !keep {
			delete(out, k)
		}
	}
	for k, v := range want {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedKeys(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func splitKeys(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
