package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// Progress describes a sandbox that is being waited for. The SDK reports it
// to a WithProgress callback each time the object changes.
type Progress struct {
	// Kind is "SandboxClaim" or "Sandbox"; Name is that object's name.
	Kind string
	Name string
	// Elapsed is the time since the wait began.
	Elapsed time.Duration
	Ready   bool
	// Reason and Message are the object's Ready condition, or the SDK's own
	// description of what is missing ("Pending", "WaitingForPodIP").
	Reason      string
	Message     string
	SandboxName string
	PodIPs      []string
}

// readiness is what a wait makes of one observation of the object.
type readiness struct {
	ready           bool
	final           bool // a state that will not become ready by waiting
	reason, message string
	sandboxName     string
	podIPs          []string
}

// Reasons the SDK reports while nothing better is known.
const (
	reasonPending         = "Pending"
	reasonWaitingForPodIP = "WaitingForPodIP"
	reasonTerminating     = "Terminating"
)

// Claim reasons that waiting cannot fix.
const (
	reasonClaimExpired   = extv1alpha1.ReasonClaimExpired
	reasonSandboxExpired = agentsv1alpha1.ReasonExpired
	reasonSandboxMissing = extv1alpha1.ReasonSandboxMissing
)

// claimReadiness: ready once status.sandbox.podIPs is set and, when the
// claim has a Ready condition, it is True.
func claimReadiness(cl *extv1alpha1.SandboxClaim) readiness {
	r := readiness{sandboxName: cl.Status.SandboxStatus.Name, podIPs: cl.Status.SandboxStatus.PodIPs}
	cond := meta.FindStatusCondition(cl.Status.Conditions, extv1alpha1.ClaimConditionReady)
	if cond != nil {
		r.reason, r.message = cond.Reason, cond.Message
	}
	switch {
	case cl.DeletionTimestamp != nil:
		r.reason, r.message, r.final = reasonTerminating, "the claim is being deleted", true
	case cond != nil && (cond.Reason == reasonClaimExpired || cond.Reason == reasonSandboxExpired || cond.Reason == reasonSandboxMissing):
		r.final = true
	case cond != nil && cond.Status != metav1.ConditionTrue:
	case len(r.podIPs) == 0 && cond == nil:
		r.reason, r.message = reasonPending, "waiting for the controller to assign a sandbox"
	case len(r.podIPs) == 0:
		r.reason, r.message = reasonWaitingForPodIP, "the claim reports no pod IP yet"
	default:
		r.ready = true
	}
	return r
}

// sandboxReadiness: ready once the Ready condition is True for the current
// generation (when the controller records one), status.podIPs is set and
// the egress mode the Sandbox asks for, if any, is in force.
func sandboxReadiness(sb *agentsv1alpha1.Sandbox) readiness {
	r := readiness{sandboxName: sb.Name, podIPs: sb.Status.PodIPs}
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
	if cond != nil {
		r.reason, r.message = cond.Reason, cond.Message
	}
	switch {
	case sb.DeletionTimestamp != nil:
		r.reason, r.message, r.final = reasonTerminating, "the sandbox is being deleted", true
	case cond != nil && (cond.Reason == agentsv1alpha1.ReasonExpired || cond.Reason == agentsv1alpha1.ReasonInvalidEgress):
		r.final = true
	case cond != nil && cond.ObservedGeneration != 0 && cond.ObservedGeneration < sb.Generation:
		r.reason, r.message = reasonPending, fmt.Sprintf("the controller has not observed generation %d yet", sb.Generation)
	case cond != nil && cond.Status != metav1.ConditionTrue:
	case len(r.podIPs) == 0 && cond == nil:
		r.reason, r.message = reasonPending, "waiting for the controller to create the pod"
	case len(r.podIPs) == 0:
		r.reason, r.message = reasonWaitingForPodIP, "the sandbox reports no pod IP yet"
	default:
		r.ready = true
	}
	return withEgress(sb, r)
}

// waitConfig is shared by the options of every call that waits.
type waitConfig struct {
	timeout  time.Duration
	progress func(Progress)
	hooks    []Hook // run by Resume (OnResume) and after a create (OnCreate)
}

var errReadyTimeout = errors.New("ready timeout")

// waitFor watches obj (already read, with its resourceVersion) until eval
// says it is ready, it is deleted, it reaches a final state, or the ready
// timeout or ctx ends. It never polls: one watch from the object's
// resourceVersion, re-established from the last seen version when the server
// closes it, and restarted from a fresh read when that version is too old.
func waitFor[T client.Object](ctx context.Context, c *Client, obj T, newList func() client.ObjectList, eval func(T) readiness, wc waitConfig) (T, error) {
	kind := "SandboxClaim"
	if _, ok := any(obj).(*agentsv1alpha1.Sandbox); ok {
		kind = "Sandbox"
	}
	start := time.Now()
	timeout := wc.timeout
	if timeout <= 0 {
		timeout = c.opts.ReadyTimeout
	}
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errReadyTimeout)
	defer cancel()

	ns, name := obj.GetNamespace(), obj.GetName()
	last := eval(obj)
	report := func(r readiness) {
		if wc.progress != nil {
			wc.progress(Progress{Kind: kind, Name: name, Elapsed: time.Since(start), Ready: r.ready,
				Reason: r.reason, Message: r.message, SandboxName: r.sandboxName, PodIPs: r.podIPs})
		}
	}
	fail := func(err error) (T, error) {
		return obj, &WaitError{Kind: kind, Namespace: ns, Name: name, Reason: last.reason, Message: last.message,
			Elapsed: time.Since(start), Err: err}
	}
	report(last)
	if last.ready {
		return obj, nil
	}
	if last.final {
		return fail(ErrNotReady)
	}

	rv := obj.GetResourceVersion()
	for {
		w, err := c.kube.Watch(wctx, newList(),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}},
			client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
		if err != nil {
			if wctx.Err() != nil {
				return fail(ctxErr(wctx))
			}
			return fail(fmt.Errorf("watching %s: %w", kind, err))
		}
		restart := false
		for !restart {
			var ev watch.Event
			var ok bool
			select {
			case <-wctx.Done():
				w.Stop()
				return fail(ctxErr(wctx))
			case ev, ok = <-w.ResultChan():
			}
			if !ok { // the server ended the watch; resume from the last version
				break
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				o, isT := ev.Object.(T)
				if !isT {
					continue
				}
				obj, rv = o, o.GetResourceVersion()
				cur := eval(o)
				if cur.ready != last.ready || cur.reason != last.reason || cur.message != last.message ||
					len(cur.podIPs) != len(last.podIPs) || cur.sandboxName != last.sandboxName {
					report(cur)
				}
				last = cur
				if cur.ready {
					w.Stop()
					return obj, nil
				}
				if cur.final {
					w.Stop()
					return fail(ErrNotReady)
				}
			case watch.Deleted:
				w.Stop()
				last.reason, last.message = "Deleted", fmt.Sprintf("the %s was deleted while waiting", kind)
				return fail(ErrNotFound)
			case watch.Bookmark:
				if o, isT := ev.Object.(T); isT {
					rv = o.GetResourceVersion()
				}
			case watch.Error:
				w.Stop()
				status := apierrors.FromObject(ev.Object)
				if !apierrors.IsResourceExpired(status) && !apierrors.IsGone(status) {
					return fail(fmt.Errorf("watching %s: %w", kind, status))
				}
				// Our version is too old: read the object again and go on from there.
				fresh := obj.DeepCopyObject().(T)
				if err := c.kube.Get(wctx, client.ObjectKey{Namespace: ns, Name: name}, fresh); err != nil {
					if apierrors.IsNotFound(err) {
						last.reason, last.message = "Deleted", fmt.Sprintf("the %s was deleted while waiting", kind)
						return fail(ErrNotFound)
					}
					if wctx.Err() != nil {
						return fail(ctxErr(wctx))
					}
					return fail(err)
				}
				obj, rv = fresh, fresh.GetResourceVersion()
				last = eval(fresh)
				report(last)
				if last.ready {
					return obj, nil
				}
				if last.final {
					return fail(ErrNotReady)
				}
				restart = true
			}
		}
		w.Stop()
	}
}

// ctxErr turns the wait context's end into ErrTimeout (the ready timeout or
// the caller's deadline) or the caller's cancellation.
func ctxErr(ctx context.Context) error {
	switch {
	case errors.Is(context.Cause(ctx), errReadyTimeout):
		return ErrTimeout
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	}
	return ctx.Err()
}
