package sdk

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// Callers whose rights on sandboxclaims are create, delete and patch only (no get, list or
// watch: the task worker's documented Role) still read a claim, wait for it and wait out its
// deletion. The SDK falls back only when the API answers 403 Forbidden:
//   - a claim is read with an empty merge patch, which changes nothing and returns the claim;
//   - readiness is watched on the claim's Sandbox, found by its claim-uid label and controller
//     reference, since the claim itself cannot be watched;
//   - Delete with Wait re-reads the claim (empty patch) until it is gone.
// What is lost: the claim's own conditions. A claim the controller cannot serve (its template
// is missing, its pod metadata refused) gets no Sandbox, so the wait ends in ErrTimeout with a
// message saying that reading sandboxclaims is forbidden, rather than at once with the reason.

// noClaimReadMsg explains a narrow-rights wait that saw no Sandbox.
const noClaimReadMsg = "no Sandbox of the claim yet; reading sandboxclaims (get/watch) is forbidden, " +
	"so the claim's own conditions (such as a missing template) cannot be seen"

// emptyPatch changes nothing; the API server answers it with the object as stored.
var emptyPatch = client.RawPatch(types.MergePatchType, []byte(`{}`))

// readClaim reads the claim called name; when get is forbidden, through an empty merge patch
// (patch rights). A NotFound error means no such claim.
func (c *Client) readClaim(ctx context.Context, name string) (*extv1alpha1.SandboxClaim, error) {
	cl := &extv1alpha1.SandboxClaim{}
	err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, cl)
	if !apierrors.IsForbidden(err) {
		return cl, err
	}
	patched := &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name}}
	perr := c.kube.Patch(ctx, patched, emptyPatch)
	if perr == nil || apierrors.IsNotFound(perr) || retryableAPIError(perr, false) {
		return patched, perr // an API server away says more than get's 403
	}
	return cl, err
}

// waitClaimGone waits until the claim called name is gone for a caller that can neither get
// nor watch claims: the empty patch that reads it is repeated, backing off, until NotFound.
func (c *Client) waitClaimGone(ctx context.Context, name string, wc waitConfig) error {
	timeout := wc.timeout
	if timeout <= 0 {
		timeout = c.opts.ReadyTimeout
	}
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errReadyTimeout)
	defer cancel()
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: 1 << 30}
	err := wait.ExponentialBackoffWithContext(wctx, backoff, func(ctx context.Context) (bool, error) {
		_, err := c.readClaim(ctx, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if retryableAPIError(err, false) {
			return false, nil // the API server is away: an empty patch is safe to repeat
		}
		return false, err
	})
	if err != nil && wctx.Err() != nil {
		return ctxErr(wctx)
	}
	return err
}

// waitViaSandbox waits for the claim cl (as created or read: its UID is known) through its
// Sandbox, for a caller that may not watch claims. The Sandbox is the one labelled with the
// claim's UID and controlled by the claim, cold-created or adopted from a warm pool.
func (s *Sandbox) waitViaSandbox(ctx context.Context, cl *extv1alpha1.SandboxClaim, wc waitConfig, start time.Time) error {
	c := s.c
	timeout := wc.timeout
	if timeout <= 0 {
		timeout = c.opts.ReadyTimeout
	}
	wctx, cancel := context.WithTimeoutCause(ctx, timeout-time.Since(start), errReadyTimeout)
	defer cancel()
	last := readiness{reason: reasonPending, message: noClaimReadMsg}
	report := func(r readiness) {
		if wc.progress != nil {
			kind, name := "Sandbox", r.sandboxName
			if name == "" { // none seen yet: the report is about the claim
				kind, name = "SandboxClaim", cl.Name
			}
			wc.progress(Progress{Kind: kind, Name: name, Elapsed: time.Since(start), Ready: r.ready,
				Reason: r.reason, Message: r.message, SandboxName: r.sandboxName, PodIPs: r.podIPs})
		}
	}
	report(last)
	var got *agentsv1alpha1.Sandbox
	sel := client.MatchingLabels{extv1alpha1.ClaimUIDLabel: string(cl.UID)}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &agentsv1alpha1.SandboxList{}
			return list, c.kube.List(ctx, list, &client.ListOptions{Raw: &o}, client.InNamespace(cl.Namespace), sel)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.kube.Watch(ctx, &agentsv1alpha1.SandboxList{}, &client.ListOptions{Raw: &o}, client.InNamespace(cl.Namespace), sel)
		},
	}
	_, err := watchtools.UntilWithSync(klog.NewContext(wctx, logr.Discard()), lw, &agentsv1alpha1.Sandbox{}, nil,
		func(ev watch.Event) (bool, error) {
			sb, ok := ev.Object.(*agentsv1alpha1.Sandbox)
			if !ok || !controlledByClaim(sb, cl) {
				return false, nil
			}
			cur := sandboxReadiness(sb)
			if ev.Type == watch.Deleted {
				cur.reason, cur.message, cur.final, cur.ready = "Deleted", "the claim's Sandbox was deleted while waiting", true, false
			}
			if cur.ready != last.ready || cur.reason != last.reason || cur.message != last.message ||
				!slices.Equal(cur.podIPs, last.podIPs) {
				report(cur)
			}
			last, got = cur, sb
			return cur.ready || cur.final, nil
		})
	if got != nil {
		s.setClaimSandbox(got)
	}
	werr := &WaitError{Kind: "SandboxClaim", Namespace: cl.Namespace, Name: cl.Name, Reason: last.reason,
		Message: last.message, Elapsed: time.Since(start)}
	switch {
	case err == nil && last.ready:
		return nil
	case err == nil:
		werr.Err = ErrNotReady
	case wctx.Err() != nil:
		werr.Err = ctxErr(wctx)
	default:
		werr.Err = fmt.Errorf("watching the claim's Sandbox: %w", err)
	}
	return werr
}

// controlledByClaim: sb is cl's, by label and by controller reference (a label alone can be
// copied onto any Sandbox).
func controlledByClaim(sb *agentsv1alpha1.Sandbox, cl *extv1alpha1.SandboxClaim) bool {
	ref := metav1.GetControllerOf(sb)
	return ref != nil && ref.Kind == "SandboxClaim" && ref.UID == cl.UID && sb.Labels[extv1alpha1.ClaimUIDLabel] == string(cl.UID)
}

// setClaimSandbox records the claim's Sandbox as observed directly: the handle's state
// comes from it until the claim is read again.
func (s *Sandbox) setClaimSandbox(sb *agentsv1alpha1.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sb = sb.DeepCopy()
	s.viaSandbox = true
	s.sbName = sb.Name
	s.podIPs = slices.Clone(sb.Status.PodIPs)
	s.noteReadyLocked(sandboxReadiness(sb).ready)
}
