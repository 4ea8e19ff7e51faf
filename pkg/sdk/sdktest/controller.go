package sdktest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// Controller stands in for the SandboxClaim and Sandbox controllers in
// tests that have an API server but no controllers and no nodes. For each
// new claim in its namespace it creates a Sandbox named after the claim and
// reports both ready with pod IP PodIP; it follows Sandbox replicas (0:
// paused, no IP; 1: ready again, on a new pod with the other of PodIP and
// ResumedPodIP, as a real cluster gives a new pod a new IP). Claims whose
// Hold returns true are left alone, for tests that drive the status
// themselves.
type Controller struct {
	Client    client.WithWatch
	Namespace string
	// PodIP is reported for a sandbox's first pod (default 127.0.0.1).
	PodIP string
	// ResumedPodIP is reported for the pod of a resume, in turn with PodIP
	// (default 127.0.0.2, where NewSandboxd listens too).
	ResumedPodIP string
	// Hold, when set, is asked for each claim; true leaves it untouched.
	Hold func(*extv1alpha1.SandboxClaim) bool

	lastIP map[types.UID]string // the pod IP last reported per Sandbox
	cancel context.CancelFunc
	done   chan struct{}
}

// StartController starts a Controller for namespace; it stops when the test
// ends.
func StartController(t testing.TB, c client.WithWatch, namespace string) *Controller {
	t.Helper()
	ctl := &Controller{Client: c, Namespace: namespace}
	if err := ctl.Start(context.Background()); err != nil {
		t.Fatalf("sdktest: starting controller: %v", err)
	}
	t.Cleanup(ctl.Stop)
	return ctl
}

// Start begins watching; Stop ends it.
func (ctl *Controller) Start(ctx context.Context) error {
	if ctl.PodIP == "" {
		ctl.PodIP = "127.0.0.1"
	}
	if ctl.ResumedPodIP == "" {
		ctl.ResumedPodIP = SecondLoopbackIP
	}
	ctl.lastIP = map[types.UID]string{}
	ctx, ctl.cancel = context.WithCancel(ctx)
	ctl.done = make(chan struct{})
	claims, err := ctl.Client.Watch(ctx, &extv1alpha1.SandboxClaimList{}, client.InNamespace(ctl.Namespace))
	if err != nil {
		ctl.cancel()
		return err
	}
	sandboxes, err := ctl.Client.Watch(ctx, &agentsv1alpha1.SandboxList{}, client.InNamespace(ctl.Namespace))
	if err != nil {
		claims.Stop()
		ctl.cancel()
		return err
	}
	go ctl.loop(ctx, claims, sandboxes)
	return nil
}

// Stop ends the controller and waits for it.
func (ctl *Controller) Stop() {
	ctl.cancel()
	<-ctl.done
}

func (ctl *Controller) loop(ctx context.Context, claims, sandboxes watch.Interface) {
	defer close(ctl.done)
	var mu sync.Mutex // the handlers below run one at a time
	defer claims.Stop()
	defer sandboxes.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-claims.ResultChan():
			if !ok {
				if claims = ctl.rewatch(ctx, &extv1alpha1.SandboxClaimList{}); claims == nil {
					return
				}
				continue
			}
			if cl, isClaim := ev.Object.(*extv1alpha1.SandboxClaim); isClaim && ev.Type != watch.Deleted {
				mu.Lock()
				ctl.onClaim(ctx, cl)
				mu.Unlock()
			}
		case ev, ok = <-sandboxes.ResultChan():
			if !ok {
				if sandboxes = ctl.rewatch(ctx, &agentsv1alpha1.SandboxList{}); sandboxes == nil {
					return
				}
				continue
			}
			if sb, isSB := ev.Object.(*agentsv1alpha1.Sandbox); isSB && ev.Type != watch.Deleted {
				mu.Lock()
				ctl.onSandbox(ctx, sb)
				mu.Unlock()
			}
		}
	}
}

func (ctl *Controller) rewatch(ctx context.Context, list client.ObjectList) watch.Interface {
	w, err := ctl.Client.Watch(ctx, list, client.InNamespace(ctl.Namespace))
	if err != nil {
		return nil
	}
	return w
}

// NewSandboxFor returns the Sandbox a claim's controller would create
// (minimal: one container).
func NewSandboxFor(cl *extv1alpha1.SandboxClaim) *agentsv1alpha1.Sandbox {
	isTrue := true
	return &agentsv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cl.Namespace,
			Name:      cl.Name,
			Labels:    cl.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: extv1alpha1.GroupVersion.String(), Kind: "SandboxClaim",
				Name: cl.Name, UID: cl.UID, Controller: &isTrue,
			}},
		},
		Spec: agentsv1alpha1.SandboxSpec{
			PodTemplate: agentsv1alpha1.PodTemplate{
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sandbox", Image: "sandboxd:test"}}},
			},
		},
	}
}

func (ctl *Controller) onClaim(ctx context.Context, cl *extv1alpha1.SandboxClaim) {
	if cl.DeletionTimestamp != nil || cl.Status.SandboxStatus.Name != "" || (ctl.Hold != nil && ctl.Hold(cl)) {
		return
	}
	sb := NewSandboxFor(cl)
	if err := ctl.Client.Create(ctx, sb); err != nil && !apierrors.IsAlreadyExists(err) {
		return
	}
	// The Sandbox's own event reports it ready and fills in the claim.
	cur := &agentsv1alpha1.Sandbox{}
	if err := ctl.Client.Get(ctx, client.ObjectKeyFromObject(sb), cur); err == nil {
		ctl.onSandbox(ctx, cur)
	}
}

func (ctl *Controller) onSandbox(ctx context.Context, sb *agentsv1alpha1.Sandbox) {
	if sb.DeletionTimestamp != nil {
		return
	}
	if owner := metav1.GetControllerOf(sb); owner != nil && owner.Kind == "SandboxClaim" && ctl.Hold != nil {
		cl := &extv1alpha1.SandboxClaim{}
		if err := ctl.Client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: owner.Name}, cl); err == nil && ctl.Hold(cl) {
			return
		}
	}
	if cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady); cond != nil &&
		cond.ObservedGeneration == sb.Generation && egressReported(sb) {
		return // already reported for this generation and these egress annotations
	}
	// The claim mirrors the Sandbox as written, never the event's copy: by the time this event is
	// handled the Sandbox may have been paused or resumed again, and a claim marked from the old
	// copy would stay wrong (the next event finds its generation already reported).
	written, err := markSandbox(ctx, ctl.Client, client.ObjectKeyFromObject(sb), ctl.podIPFor)
	if err != nil {
		return
	}
	ips := written.Status.PodIPs
	if len(ips) > 0 {
		ctl.lastIP[written.UID] = ips[0]
	}
	if owner := metav1.GetControllerOf(written); owner != nil && owner.Kind == "SandboxClaim" {
		ready := meta.FindStatusCondition(written.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
		_ = MarkClaim(ctx, ctl.Client, client.ObjectKey{Namespace: sb.Namespace, Name: owner.Name}, sb.Name, ips,
			ready.Status, ready.Reason, "")
	}
}

// podIPFor picks the IP of sb's running pod: the one reported last, or the other one when the
// Sandbox was reported paused since (its pod is a new one).
func (ctl *Controller) podIPFor(sb *agentsv1alpha1.Sandbox) string {
	last, ok := ctl.lastIP[sb.UID]
	switch {
	case !ok:
		return ctl.PodIP
	case !reportedPaused(sb):
		return last
	case last == ctl.PodIP:
		return ctl.ResumedPodIP
	}
	return ctl.PodIP
}

func reportedPaused(sb *agentsv1alpha1.Sandbox) bool {
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
	return cond != nil && cond.Reason == agentsv1alpha1.ReasonPaused
}

// MarkSandbox writes the status a Sandbox controller would: ready with
// podIP for replicas 1, paused without IPs for replicas 0, for the current
// generation; and the EgressPolicy condition of its egress annotations.
func MarkSandbox(ctx context.Context, c client.Client, key client.ObjectKey, podIP string) error {
	_, err := markSandbox(ctx, c, key, func(*agentsv1alpha1.Sandbox) string { return podIP })
	return err
}

// markSandbox is MarkSandbox returning the Sandbox it wrote, with the pod IP podIPFor picks for
// the Sandbox as read.
func markSandbox(ctx context.Context, c client.Client, key client.ObjectKey,
	podIPFor func(*agentsv1alpha1.Sandbox) string) (*agentsv1alpha1.Sandbox, error) {
	sb := &agentsv1alpha1.Sandbox{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, sb); err != nil {
			return err
		}
		cond := metav1.Condition{Type: agentsv1alpha1.SandboxConditionReady, ObservedGeneration: sb.Generation}
		if sb.DesiredReplicas() == agentsv1alpha1.PausedReplicas {
			sb.Status.PodIPs, sb.Status.Replicas = nil, 0
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, agentsv1alpha1.ReasonPaused, "the sandbox is paused"
		} else {
			sb.Status.PodIPs, sb.Status.Replicas = []string{podIPFor(sb)}, 1
			cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, agentsv1alpha1.ReasonReady, "pod is ready"
		}
		meta.SetStatusCondition(&sb.Status.Conditions, cond)
		markEgress(sb)
		return c.Status().Update(ctx, sb)
	})
	return sb, err
}

// egressReported reports whether the EgressPolicy condition reflects the egress annotations
// (which change without a new generation).
func egressReported(sb *agentsv1alpha1.Sandbox) bool {
	spec, requested, err := egress.FromAnnotations(sb.Annotations)
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionEgressPolicy)
	switch {
	case !requested:
		return cond == nil
	case err != nil:
		return cond != nil && cond.Reason == agentsv1alpha1.ReasonInvalidEgress && cond.Message == err.Error()
	}
	return cond != nil && cond.Status == metav1.ConditionTrue && spec.Applied(cond.Message)
}

// markEgress reports the egress mode the Sandbox's annotations ask for as the controller
// would: in force when valid, InvalidEgress (and no pod: not ready) when not.
func markEgress(sb *agentsv1alpha1.Sandbox) {
	spec, requested, err := egress.FromAnnotations(sb.Annotations)
	cond := metav1.Condition{Type: agentsv1alpha1.SandboxConditionEgressPolicy, ObservedGeneration: sb.Generation}
	switch {
	case !requested:
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1alpha1.SandboxConditionEgressPolicy)
		return
	case err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, agentsv1alpha1.ReasonInvalidEgress, err.Error()
		sb.Status.PodIPs, sb.Status.Replicas = nil, 0
		meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: agentsv1alpha1.SandboxConditionReady,
			Status: metav1.ConditionFalse, Reason: cond.Reason, Message: cond.Message, ObservedGeneration: sb.Generation})
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, agentsv1alpha1.ReasonEgressApplied, spec.AppliedMessage(sb.Name)
	}
	meta.SetStatusCondition(&sb.Status.Conditions, cond)
}

// MarkClaim writes a claim's status: the Sandbox name, pod IPs and a Ready
// condition.
func MarkClaim(ctx context.Context, c client.Client, key client.ObjectKey, sandboxName string, podIPs []string,
	ready metav1.ConditionStatus, reason, message string) error {
	if reason == "" {
		return fmt.Errorf("MarkClaim: a condition reason is required")
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cl := &extv1alpha1.SandboxClaim{}
		if err := c.Get(ctx, key, cl); err != nil {
			return err
		}
		cl.Status.SandboxStatus.Name = sandboxName
		cl.Status.SandboxStatus.PodIPs = podIPs
		meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: extv1alpha1.ClaimConditionReady, Status: ready, Reason: reason,
			Message: message, ObservedGeneration: cl.Generation})
		return c.Status().Update(ctx, cl)
	})
}
