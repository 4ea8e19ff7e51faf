package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/noredirect"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Idle pause: a Sandbox with agents.x-k8s.io/idle-timeout is paused (replicas: 0, exactly as a
// user's pause) once sandboxd reports nothing happening for that long. sandboxd is where the
// activity is seen: every request the router forwards to it, every command it runs (the
// router tells it about requests to the pod's other ports). The controller asks it through the
// router, whose authorization and network reach the pod already.

// MinIdleTimeout is the shortest idle timeout accepted: shorter would pause between the
// commands of one agent turn.
const MinIdleTimeout = 10 * time.Second

// ActivitySource tells what a Sandbox's sandboxd reports about its activity.
type ActivitySource interface {
	Activity(ctx context.Context, namespace, name string) (wire.Activity, error)
}

// idleTimeout reads the annotation: set says whether there is one, err why it is unusable.
func idleTimeout(sb *agentsv1beta1.Sandbox) (d time.Duration, set bool, err error) {
	v, set := sb.Annotations[agentsv1beta1.IdleTimeoutAnnotation]
	if !set {
		return 0, false, nil
	}
	d, err = time.ParseDuration(strings.TrimSpace(v))
	switch {
	case err != nil:
		return 0, true, fmt.Errorf("annotation %s: %q is not a duration such as 10m or 1h30m", agentsv1beta1.IdleTimeoutAnnotation, v)
	case d < MinIdleTimeout:
		return 0, true, fmt.Errorf("annotation %s: %s is shorter than the minimum %s", agentsv1beta1.IdleTimeoutAnnotation, v, MinIdleTimeout)
	}
	return d, true, nil
}

// idlePauseCondition is the IdlePause condition for the annotation, nil without one.
func idlePauseCondition(sb *agentsv1beta1.Sandbox) *metav1.Condition {
	d, set, err := idleTimeout(sb)
	if !set {
		return nil
	}
	c := &metav1.Condition{Type: agentsv1beta1.SandboxConditionIdlePause, ObservedGeneration: sb.Generation}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, agentsv1beta1.ReasonInvalidIdleTimeout, err.Error()+"; the Sandbox is never paused for being idle"
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, agentsv1beta1.ReasonIdleWatched
	c.Message = fmt.Sprintf("paused after %s with no request through the router and no command running", d)
	if sb.WakesOnRequest() {
		c.Message += "; the next request through the router resumes it"
	}
	return c
}

// warnIfIdleTimeoutInvalid sends one event when the idle-timeout annotation turns unusable.
func (r *Reconciler) warnIfIdleTimeoutInvalid(before, after *agentsv1beta1.Sandbox) {
	invalid := func(sb *agentsv1beta1.Sandbox) *metav1.Condition {
		c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionIdlePause)
		if c == nil || c.Status != metav1.ConditionFalse {
			return nil
		}
		return c
	}
	if c := invalid(after); c != nil && invalid(before) == nil {
		r.recorder.Event(after, corev1.EventTypeWarning, agentsv1beta1.ReasonInvalidIdleTimeout, c.Message)
	}
}

// idleCheckEvery is how often activity is asked for: often enough to pause within a quarter of
// the timeout of going idle, never more than every second nor less than every 30 s.
func idleCheckEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/4, time.Second), 30*time.Second)
}

// reconcileIdle pauses the Sandbox when it has been idle for its timeout and returns when to
// look again (0: no need). It runs after the status is written, on a running, Ready Sandbox.
func (r *Reconciler) reconcileIdle(ctx context.Context, sb *agentsv1beta1.Sandbox) (time.Duration, error) {
	if sb.DesiredReplicas() > 0 {
		if _, marked := sb.Annotations[agentsv1beta1.IdlePausedAnnotation]; marked {
			// Resumed (by a request through the router, or by hand): it is no longer idle-paused.
			log.FromContext(ctx).V(2).Info("resumed: clearing the idle-paused mark", "idlePausedAt", idlePaused(sb))
			return 0, r.client.Patch(ctx, sb, client.RawPatch(client.Merge.Type(),
				fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, agentsv1beta1.IdlePausedAnnotation)), agentsv1beta1.FieldOwner)
		}
	}
	timeout, set, err := idleTimeout(sb)
	key := client.ObjectKeyFromObject(sb)
	if !set || err != nil || r.activity == nil || sb.DesiredReplicas() == 0 || unclaimedPoolMember(sb) ||
		!meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
		r.watchedSince.Delete(key)
		return 0, nil
	}
	since := r.watchedFrom(sb)
	every := idleCheckEvery(timeout)
	act, err := r.activity.Activity(ctx, sb.Namespace, sb.Name)
	if err != nil {
		// Not knowing is no reason to pause; ask again later.
		log.FromContext(ctx).V(1).Info("could not read the sandbox's activity", "err", err.Error())
		return every, nil
	}
	// Idle no longer than it has been watched: a pool member adopted after an hour in its pool
	// is not idle for an hour, and a controller that just started knows nothing older.
	idle := min(time.Duration(act.IdleSeconds*float64(time.Second)), r.clock.Since(since))
	if act.Active || idle < timeout {
		log.FromContext(ctx).V(3).Info("not idle long enough to pause", "active", act.Active, "idle", idle, "timeout", timeout)
		return min(every, max(timeout-idle, time.Second)), nil
	}
	now := r.clock.Now().UTC()
	patched := sb.DeepCopy()
	patched.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	metav1.SetMetaDataAnnotation(&patched.ObjectMeta, agentsv1beta1.IdlePausedAnnotation, now.Format(time.RFC3339))
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(sb, client.MergeFromWithOptimisticLock{}), agentsv1beta1.FieldOwner); err != nil {
		if apierrors.IsConflict(err) {
			// Changed since this reconcile read it (a user's edit, a resume): look again.
			log.FromContext(ctx).V(2).Info("idle pause lost a race with another change; looking again")
			return time.Second, nil
		}
		return 0, err
	}
	idlePauses.Inc()
	log.FromContext(ctx).V(2).Info("paused for being idle", "idle", idle, "timeout", timeout, "lastActivity", act.LastActivity)
	r.recorder.Eventf(sb, corev1.EventTypeNormal, agentsv1beta1.ReasonIdlePaused,
		"Paused after %s without activity (last at %s)%s", idle.Round(time.Second), act.LastActivity.Format(time.RFC3339), wakeHint(sb))
	return 0, nil
}

// watchedFrom is when this process first saw the Sandbox (this incarnation of it) eligible for
// the idle pause: running, Ready, not waiting in a pool.
func (r *Reconciler) watchedFrom(sb *agentsv1beta1.Sandbox) time.Time {
	type watched struct {
		uid   types.UID
		since time.Time
	}
	key := client.ObjectKeyFromObject(sb)
	if v, ok := r.watchedSince.Load(key); ok && v.(watched).uid == sb.UID {
		return v.(watched).since
	}
	now := r.clock.Now()
	r.watchedSince.Store(key, watched{sb.UID, now})
	return now
}

// unclaimedPoolMember: a warm pool member waits, idle by design, for a claim; its idle clock
// starts when a claim takes it.
func unclaimedPoolMember(sb *agentsv1beta1.Sandbox) bool {
	ref := metav1.GetControllerOfNoCopy(sb)
	return ref != nil && ref.Kind == "SandboxWarmPool" && index.IsClaimOrPool(ref)
}

// idlePaused is when the controller paused the Sandbox for being idle, "" when it did not.
func idlePaused(sb *agentsv1beta1.Sandbox) string {
	return sb.Annotations[agentsv1beta1.IdlePausedAnnotation]
}

// wakeHintIfWakes tells a paused Sandbox's user that a request resumes it, when one does.
func wakeHintIfWakes(sb *agentsv1beta1.Sandbox) string {
	if sb.WakesOnRequest() {
		return wakeHint(sb)
	}
	return ""
}

func wakeHint(sb *agentsv1beta1.Sandbox) string {
	if sb.WakesOnRequest() {
		return "; the next request through the router resumes it"
	}
	return "; set replicas: 1 to resume it"
}

// RouterActivity asks sandboxd through the router: GET /v1/activity with the routing headers
// and this process's ServiceAccount token (or none, where the router names the caller by its
// pod). A redirect in the answer (the router passes a sandbox's 3xx through) is never followed,
// whatever Client says: it would carry the token, and the controller's reach, where the sandbox
// points.
type RouterActivity struct {
	URL       string // the router's base URL
	TokenFile string // read on every call, as the kubelet rotates it; "" or missing: no token
	Client    *http.Client
}

// Activity implements ActivitySource.
func (a *RouterActivity) Activity(ctx context.Context, namespace, name string) (wire.Activity, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(a.URL, "/")+"/v1/activity", nil)
	if err != nil {
		return wire.Activity{}, err
	}
	req.Header.Set("X-Sandbox-ID", name)
	req.Header.Set("X-Sandbox-Namespace", namespace)
	if a.TokenFile != "" {
		if tok, err := os.ReadFile(a.TokenFile); err == nil {
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		}
	}
	resp, err := noredirect.Client(a.Client).Do(req)
	if err != nil {
		return wire.Activity{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return wire.Activity{}, fmt.Errorf("GET /v1/activity of %s/%s through the router: HTTP %d", namespace, name, resp.StatusCode)
	}
	var act wire.Activity
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<16)).Decode(&act); err != nil {
		return wire.Activity{}, fmt.Errorf("GET /v1/activity of %s/%s: %w", namespace, name, err)
	}
	return act, nil
}
