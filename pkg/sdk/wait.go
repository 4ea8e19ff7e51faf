package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
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
	// The controller refuses the claim's pod metadata; it makes no Sandbox for it.
	reasonInvalidMetadata = extv1alpha1.ReasonInvalidMetadata
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
	case cond != nil && (cond.Reason == reasonClaimExpired || cond.Reason == reasonSandboxExpired ||
		cond.Reason == reasonSandboxMissing || cond.Reason == reasonInvalidMetadata):
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
	case cond != nil && (cond.Reason == agentsv1alpha1.ReasonExpired || cond.Reason == agentsv1alpha1.ReasonInvalidEgress ||
		cond.Reason == agentsv1alpha1.ReasonEgressDomainsUnenforceable):
		// Waiting cannot fix these (an engine for names comes only with a controller restart).
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
// resourceVersion, which client-go's RetryWatcher re-establishes from the last
// seen version when the server closes it, restarted from a fresh read when
// that version is too old; that read is repeated while the API server is
// away, until the ready timeout.
func waitFor[T client.Object](ctx context.Context, c *Client, obj T, newList func() client.ObjectList, eval func(T) readiness, wc waitConfig) (T, error) {
	w := &waiter[T]{c: c, kind: "SandboxClaim", ns: obj.GetNamespace(), name: obj.GetName(), newList: newList,
		eval: eval, progress: wc.progress, start: time.Now(), obj: obj}
	if _, ok := any(obj).(*agentsv1alpha1.Sandbox); ok {
		w.kind = "Sandbox"
	}
	timeout := wc.timeout
	if timeout <= 0 {
		timeout = c.opts.ReadyTimeout
	}
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errReadyTimeout)
	defer cancel()

	w.last = eval(obj)
	w.report(w.last)
	reread := false
	var retry apiBackoff
	for !w.last.ready && !w.last.final {
		var err error
		if reread {
			err = w.reread(wctx)
		} else {
			err = w.follow(wctx)
		}
		switch {
		case errors.Is(err, errWatchExpired):
			// Our version is too old: read the object again and go on from there.
			reread = true
		case reread && retryableAPIError(err, false):
			// The API server is still away after the client's own retries (a long restart):
			// read again until the ready timeout.
			if !retry.wait(wctx, time.Time{}) {
				return w.fail(fmt.Errorf("%w: %w", ctxErr(wctx), err))
			}
		case err != nil:
			return w.fail(err)
		default:
			reread, retry = false, apiBackoff{}
		}
	}
	if w.last.ready {
		return w.obj, nil
	}
	return w.fail(ErrNotReady)
}

// errWatchExpired: the resourceVersion being watched from is too old (or
// there is none); the object has to be read again.
var errWatchExpired = errors.New("watch expired")

// waiter is the state of one waitFor: the object as last seen and what eval
// made of it.
type waiter[T client.Object] struct {
	c        *Client
	kind     string
	ns, name string
	newList  func() client.ObjectList
	eval     func(T) readiness
	progress func(Progress)
	start    time.Time

	obj  T
	last readiness
}

func (w *waiter[T]) report(r readiness) {
	if w.progress != nil {
		w.progress(Progress{Kind: w.kind, Name: w.name, Elapsed: time.Since(w.start), Ready: r.ready,
			Reason: r.reason, Message: r.message, SandboxName: r.sandboxName, PodIPs: r.podIPs})
	}
}

func (w *waiter[T]) fail(err error) (T, error) {
	return w.obj, &WaitError{Kind: w.kind, Namespace: w.ns, Name: w.name, Reason: w.last.reason, Message: w.last.message,
		Elapsed: time.Since(w.start), Err: err}
}

// deleted records that the object went away while waiting.
func (w *waiter[T]) deleted() error {
	w.last.reason, w.last.message = "Deleted", fmt.Sprintf("the %s was deleted while waiting", w.kind)
	return ErrNotFound
}

// follow watches the object from its resourceVersion until it is ready or
// final (nil), or returns why the watch ended: errWatchExpired, ErrNotFound
// when it was deleted, the wait context's end (ctxErr), or the watch's
// failure. A watch the server closes, or that fails on a restarting or busy
// API server, is resumed by the RetryWatcher.
func (w *waiter[T]) follow(ctx context.Context) error {
	rv := w.obj.GetResourceVersion()
	if rv == "" || rv == "0" {
		return errWatchExpired
	}
	watchCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	lw := &toolscache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		wi, err := w.c.kube.Watch(ctx, w.newList(), &client.ListOptions{Raw: &opts},
			client.InNamespace(w.ns), client.MatchingFields{"metadata.name": w.name})
		if err != nil && !retryableWatchError(err) {
			stop(fmt.Errorf("watching %s: %w", w.kind, err))
		}
		return wi, err
	}}
	// The RetryWatcher logs what it retries through the context's logger; the
	// SDK reports through its errors instead.
	rw, err := watchtools.NewRetryWatcherWithContext(klog.NewContext(watchCtx, logr.Discard()), rv, lw)
	if err != nil {
		return err
	}
	defer func() { rw.Stop(); <-rw.Done() }()
	_, err = watchtools.UntilWithoutRetry(watchCtx, rw, w.onEvent)
	switch {
	case err == nil:
		return nil
	case !wait.Interrupted(err) && !errors.Is(err, watchtools.ErrWatchClosed):
		return err // from onEvent
	case ctx.Err() != nil:
		return ctxErr(ctx)
	case watchCtx.Err() != nil:
		return context.Cause(watchCtx) // a watch call failed for good
	}
	return errWatchExpired // the watcher gave up: start over from a fresh read
}

// onEvent takes one watch event; it is done once the object is ready or final.
func (w *waiter[T]) onEvent(ev watch.Event) (bool, error) {
	switch ev.Type {
	case watch.Added, watch.Modified:
		o, isT := ev.Object.(T)
		if !isT {
			return false, nil
		}
		w.obj = o
		cur := w.eval(o)
		if cur.ready != w.last.ready || cur.reason != w.last.reason || cur.message != w.last.message ||
			len(cur.podIPs) != len(w.last.podIPs) || cur.sandboxName != w.last.sandboxName {
			w.report(cur)
		}
		w.last = cur
		return cur.ready || cur.final, nil
	case watch.Deleted:
		return false, w.deleted()
	case watch.Error:
		status := apierrors.FromObject(ev.Object)
		if apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
			return false, errWatchExpired
		}
		return false, fmt.Errorf("watching %s: %w", w.kind, status)
	}
	return false, nil
}

// reread reads the object again (its watch expired) and reports what it is now.
func (w *waiter[T]) reread(ctx context.Context) error {
	fresh := w.obj.DeepCopyObject().(T)
	if err := w.c.kube.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return w.deleted()
		}
		if ctx.Err() != nil {
			return ctxErr(ctx)
		}
		return err
	}
	w.obj = fresh
	w.last = w.eval(fresh)
	w.report(w.last)
	return nil
}

// retryableWatchError reports whether a failed watch call may succeed when
// tried again: the API server restarting (a refused, reset or lost
// connection), overloaded or timing out, what a read retries and more, since
// a watch changes nothing. Any other failure (no permission, no such kind)
// ends the wait.
func retryableWatchError(err error) bool {
	return retryableAPIError(err, false) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		utilnet.IsTimeout(err) || apierrors.IsInternalError(err)
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
