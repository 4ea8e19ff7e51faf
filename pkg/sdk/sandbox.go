package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// Sandbox is a handle on one sandbox: the one behind a SandboxClaim, or a
// Sandbox created without a claim. It runs commands and moves files in the
// sandbox through the client's connection mode. It is safe for concurrent
// use. Close releases its port-forward (ModePortForward); the sandbox itself
// lives on until deleted.
type Sandbox struct {
	c    *Client
	ns   string
	name string // the claim's name, or the Sandbox's for a raw sandbox
	raw  bool

	mu     sync.Mutex
	claim  *extv1alpha1.SandboxClaim
	sb     *agentsv1alpha1.Sandbox
	sbName string
	podIPs []string
	// viaSandbox: the claim could not be read (403), so readiness comes from its Sandbox (sb).
	viaSandbox bool
	// readyAt is when the handle last saw the sandbox become ready (zero
	// when it is not, or after Pause).
	readyAt time.Time

	tr transport // set once at construction
}

func (c *Client) claimHandle(cl *extv1alpha1.SandboxClaim) *Sandbox {
	s := &Sandbox{c: c, ns: cl.Namespace, name: cl.Name}
	s.setClaim(cl)
	s.tr = c.newTransport(s)
	return s
}

func (c *Client) sandboxHandle(sb *agentsv1alpha1.Sandbox) *Sandbox {
	s := &Sandbox{c: c, ns: sb.Namespace, name: sb.Name, raw: true}
	s.setSandbox(sb)
	s.tr = c.newTransport(s)
	return s
}

func (s *Sandbox) setClaim(cl *extv1alpha1.SandboxClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claim = cl.DeepCopy()
	s.viaSandbox = false
	s.sbName = cl.Status.SandboxStatus.Name
	s.podIPs = slices.Clone(cl.Status.SandboxStatus.PodIPs)
	s.noteReadyLocked(claimReadiness(cl).ready)
}

// noteReadyLocked records when the sandbox was first seen ready.
func (s *Sandbox) noteReadyLocked(ready bool) {
	switch {
	case !ready:
		s.readyAt = time.Time{}
	case s.readyAt.IsZero():
		s.readyAt = time.Now()
	}
}

func (s *Sandbox) readySince() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readyAt
}

func (s *Sandbox) setSandbox(sb *agentsv1alpha1.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sb = sb.DeepCopy()
	s.sbName = sb.Name
	s.podIPs = slices.Clone(sb.Status.PodIPs)
	s.noteReadyLocked(sandboxReadiness(sb).ready)
}

// Name is the claim's name (the Sandbox's, for a sandbox without a claim):
// the name to Get, Delete, Pause or Resume it by.
func (s *Sandbox) Name() string { return s.name }

// Namespace is the sandbox's namespace.
func (s *Sandbox) Namespace() string { return s.ns }

// IsClaim reports whether the sandbox is behind a SandboxClaim.
func (s *Sandbox) IsClaim() bool { return !s.raw }

// SandboxName is the name of the Sandbox object (status.sandbox.name of the
// claim). It differs from Name when the sandbox was adopted from a warm
// pool, and is empty until the controller assigned one.
func (s *Sandbox) SandboxName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sbName
}

// sandboxObjectName is the Sandbox to patch or route to: the assigned one,
// else the claim's name (the name of a cold-created Sandbox).
func (s *Sandbox) sandboxObjectName() string {
	if n := s.SandboxName(); n != "" {
		return n
	}
	return s.name
}

// PodIPs are the sandbox pod's IPs as last read from the API.
func (s *Sandbox) PodIPs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.podIPs)
}

// PodIP is the pod's first IPv4 address, else its first address, else "".
func (s *Sandbox) PodIP() string {
	ips := s.PodIPs()
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
			return ip
		}
	}
	if len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// Template is the SandboxTemplate the claim references ("" for a sandbox
// without a claim).
func (s *Sandbox) Template() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claim == nil {
		return ""
	}
	return s.claim.Spec.TemplateRef.Name
}

// Claim is a copy of the SandboxClaim as last read (nil for a sandbox
// without a claim).
func (s *Sandbox) Claim() *extv1alpha1.SandboxClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claim.DeepCopy()
}

// Object is a copy of the Sandbox as last read: always set for a sandbox
// without a claim; for a claim, only after Pause, Resume or LoadSandbox.
func (s *Sandbox) Object() *agentsv1alpha1.Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sb.DeepCopy()
}

// Status summarises the sandbox for display.
type Status struct {
	Ready bool
	// Reason and Message of the Ready condition (empty when none yet).
	Reason, Message string
	SandboxName     string
	PodIPs          []string
	Template        string
	Labels          map[string]string
	Created         time.Time
	// ShutdownTime is when the sandbox expires (zero: never).
	ShutdownTime time.Time
	// Paused is known for sandboxes without a claim and after Pause,
	// Resume or LoadSandbox. IdlePaused: the controller paused it for being
	// idle (rather than someone pausing it); either way, with WakesOnRequest
	// the next request through the router resumes it.
	Paused, IdlePaused, WakesOnRequest bool
}

// Status summarises the last read state.
func (s *Sandbox) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st Status
	var r readiness
	if s.claim != nil {
		r = claimReadiness(s.claim)
		st.Template = s.claim.Spec.TemplateRef.Name
		st.Labels = s.claim.Labels
		st.Created = s.claim.CreationTimestamp.Time
		if lc := s.claim.Spec.Lifecycle; lc != nil && lc.ShutdownTime != nil {
			st.ShutdownTime = lc.ShutdownTime.Time
		}
		if cond := meta.FindStatusCondition(s.claim.Status.Conditions, extv1alpha1.ClaimConditionReady); cond != nil {
			st.Reason, st.Message = cond.Reason, cond.Message
		}
	}
	if s.sb != nil {
		if s.claim == nil || s.viaSandbox {
			r = sandboxReadiness(s.sb)
			if cond := meta.FindStatusCondition(s.sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady); cond != nil {
				st.Reason, st.Message = cond.Reason, cond.Message
			}
		}
		if s.claim == nil {
			st.Labels = s.sb.Labels
			st.Created = s.sb.CreationTimestamp.Time
			if s.sb.Spec.ShutdownTime != nil {
				st.ShutdownTime = s.sb.Spec.ShutdownTime.Time
			}
		}
		st.Paused = s.sb.DesiredReplicas() == agentsv1alpha1.PausedReplicas
		_, idle := s.sb.Annotations[agentsv1alpha1.IdlePausedAnnotation]
		st.IdlePaused = st.Paused && idle
		st.WakesOnRequest = s.sb.WakesOnRequest()
	}
	st.Ready = r.ready
	st.SandboxName = s.sbName
	st.PodIPs = slices.Clone(s.podIPs)
	return st
}

// Refresh reads the claim (or Sandbox) again. An error wraps ErrNotFound
// when it is gone.
func (s *Sandbox) Refresh(ctx context.Context) error {
	if s.raw {
		sb := &agentsv1alpha1.Sandbox{}
		if err := s.c.kube.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.name}, sb); err != nil {
			return kubeErr(err, "reading sandbox %s/%s", s.ns, s.name)
		}
		s.setSandbox(sb)
		return nil
	}
	cl, err := s.c.readClaim(ctx, s.name)
	if err != nil {
		return kubeErr(err, "reading sandboxclaim %s/%s", s.ns, s.name)
	}
	s.mu.Lock()
	via := s.viaSandbox
	s.mu.Unlock()
	if !via {
		s.setClaim(cl)
		return nil
	}
	// Read through a patch (no get on claims): the claim's status may lag its Sandbox, which
	// is what the handle follows.
	name := cl.Status.SandboxStatus.Name
	if name == "" {
		name = s.sandboxObjectName()
	}
	sb := &agentsv1alpha1.Sandbox{}
	if err := s.c.kube.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, sb); err != nil {
		return kubeErr(err, "reading sandbox %s/%s", s.ns, name)
	}
	s.mu.Lock()
	s.claim = cl.DeepCopy()
	s.mu.Unlock()
	if controlledByClaim(sb, cl) {
		s.setClaimSandbox(sb)
	}
	return nil
}

// LoadSandbox reads the Sandbox object behind the handle (for a claim, the
// one named in its status) so that Object and Status report it.
func (s *Sandbox) LoadSandbox(ctx context.Context) (*agentsv1alpha1.Sandbox, error) {
	sb := &agentsv1alpha1.Sandbox{}
	name := s.sandboxObjectName()
	if err := s.c.kube.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, sb); err != nil {
		return nil, kubeErr(err, "reading sandbox %s/%s", s.ns, name)
	}
	s.mu.Lock()
	s.sb = sb.DeepCopy()
	s.mu.Unlock()
	return sb, nil
}

// WaitReady waits (watching) until the sandbox is ready, within the ready
// timeout. See Create for the errors.
func (s *Sandbox) WaitReady(ctx context.Context, opts ...WaitOption) error {
	var wc waitConfig
	for _, o := range opts {
		if o != nil {
			o.applyWait(&wc)
		}
	}
	if s.raw {
		s.mu.Lock()
		sb := s.sb.DeepCopy()
		s.mu.Unlock()
		got, err := waitFor(ctx, s.c, sb, func() client.ObjectList { return &agentsv1alpha1.SandboxList{} }, sandboxReadiness, wc)
		s.setSandbox(got)
		return err
	}
	s.mu.Lock()
	cl := s.claim.DeepCopy()
	s.mu.Unlock()
	start := time.Now()
	got, err := waitFor(ctx, s.c, cl, func() client.ObjectList { return &extv1alpha1.SandboxClaimList{} }, claimReadiness, wc)
	if apierrors.IsForbidden(err) && got.UID != "" {
		// No watch on claims: follow the claim's Sandbox instead.
		return s.waitViaSandbox(ctx, got, wc, start)
	}
	s.setClaim(got)
	return err
}

// Pause scales the Sandbox to zero replicas: the pod is deleted, volumes
// and the Service are kept. Commands fail with ErrNotReady until Resume.
// Pause(ctx, KeepMemory) keeps the processes' memory too (gVisor).
func (s *Sandbox) Pause(ctx context.Context, opts ...PauseOption) error {
	if err := s.patchSandbox(ctx, agentsv1alpha1.PausedReplicas, pausePatch(opts)); err != nil {
		return err
	}
	s.mu.Lock()
	s.podIPs = nil
	s.readyAt = time.Time{}
	s.mu.Unlock()
	s.resetTransport()
	return nil
}

// Resume scales the Sandbox back to one replica and waits until the new pod
// is ready (its IP differs from before), then runs the OnResume hooks.
func (s *Sandbox) Resume(ctx context.Context, opts ...WaitOption) error {
	var wc waitConfig
	for _, o := range opts {
		if o != nil {
			o.applyWait(&wc)
		}
	}
	if err := s.patchReplicas(ctx, agentsv1alpha1.RunningReplicas); err != nil {
		return err
	}
	s.resetTransport()
	s.mu.Lock()
	sb := s.sb.DeepCopy()
	s.mu.Unlock()
	got, err := waitFor(ctx, s.c, sb, func() client.ObjectList { return &agentsv1alpha1.SandboxList{} }, sandboxReadiness, wc)
	s.mu.Lock()
	s.sb = got.DeepCopy()
	s.podIPs = slices.Clone(got.Status.PodIPs)
	s.noteReadyLocked(err == nil)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if !s.raw {
		if err := s.waitClaimShows(ctx, got.Status.PodIPs, wc); err != nil {
			return err
		}
	}
	return s.runHooks(ctx, hookOnResume, wc.hooks)
}

// waitClaimShows waits until the claim's status reports the resumed pod (podIPs): handles made
// later, by another process's Get, read the claim, whose status mirrors the Sandbox a moment
// after it; a claim still showing the pod from before the pause does not count.
func (s *Sandbox) waitClaimShows(ctx context.Context, podIPs []string, wc waitConfig) error {
	s.mu.Lock()
	cl := s.claim.DeepCopy()
	s.mu.Unlock()
	if cl == nil {
		return nil
	}
	eval := func(cl *extv1alpha1.SandboxClaim) readiness {
		r := claimReadiness(cl)
		if r.ready && !slices.Equal(r.podIPs, podIPs) {
			r.ready, r.reason, r.message = false, reasonWaitingForPodIP, "the claim does not show the resumed pod yet"
		}
		return r
	}
	got, err := waitFor(ctx, s.c, cl, func() client.ObjectList { return &extv1alpha1.SandboxClaimList{} }, eval, wc)
	s.setClaim(got)
	return err
}

func (s *Sandbox) patchReplicas(ctx context.Context, n int32) error {
	return s.patchSandbox(ctx, n, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
}

// patchSandbox sends a merge patch that sets replicas to n (and maybe more) to the Sandbox.
func (s *Sandbox) patchSandbox(ctx context.Context, n int32, mergePatch []byte) error {
	name := s.sandboxObjectName()
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}
	patch := client.RawPatch(types.MergePatchType, mergePatch)
	if err := s.c.kube.Patch(ctx, sb, patch); err != nil {
		if apierrors.IsNotFound(err) && !s.raw && s.SandboxName() == "" {
			return fmt.Errorf("sandboxclaim %s/%s has no sandbox yet: %w", s.ns, s.name, ErrNotReady)
		}
		return kubeErr(err, "scaling sandbox %s/%s to %d", s.ns, name, n)
	}
	s.mu.Lock()
	s.sb = sb.DeepCopy()
	s.mu.Unlock()
	return nil
}

// KeepAlive moves the shutdown time to now+d.
func (s *Sandbox) KeepAlive(ctx context.Context, d time.Duration) error {
	return s.SetShutdownTime(ctx, time.Now().Add(d))
}

// SetShutdownTime sets the claim's spec.lifecycle.shutdownTime (the
// Sandbox's spec.shutdownTime for a sandbox without a claim); the zero time
// removes it.
func (s *Sandbox) SetShutdownTime(ctx context.Context, t time.Time) error {
	if s.raw {
		sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}}
		if err := s.c.kube.Patch(ctx, sb, shutdownPatch(t, false)); err != nil {
			return kubeErr(err, "setting the shutdown time of sandbox %s/%s", s.ns, s.name)
		}
		s.setSandbox(sb)
		return nil
	}
	cl := &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}}
	if err := s.c.kube.Patch(ctx, cl, shutdownPatch(t, true)); err != nil {
		return kubeErr(err, "setting the shutdown time of sandboxclaim %s/%s", s.ns, s.name)
	}
	s.setClaim(cl)
	return nil
}

// Delete deletes the claim (cascading to the Sandbox and pod), or the
// Sandbox for a sandbox without a claim, and closes the handle. Unlike
// Client.Delete it is idempotent: an already deleted sandbox is no error.
func (s *Sandbox) Delete(ctx context.Context, opts ...DeleteOption) error {
	defer s.Close()
	err := s.c.Delete(ctx, s.name, opts...)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Close releases the handle's connection resources (the port-forward in
// ModePortForward). The sandbox keeps running; the handle can still be used
// and reconnects when needed.
func (s *Sandbox) Close() error {
	s.resetTransport()
	return nil
}

// resetTransport drops connection state tied to the old pod (the
// port-forward); the transport is rebuilt on next use.
func (s *Sandbox) resetTransport() {
	s.tr.reset()
}

// ensureIPs re-reads the object once when no pod IP is known yet, for the
// modes that dial the pod.
func (s *Sandbox) ensureIPs(ctx context.Context) (string, error) {
	if ip := s.PodIP(); ip != "" {
		return ip, nil
	}
	if err := s.Refresh(ctx); err != nil {
		return "", err
	}
	if ip := s.PodIP(); ip != "" {
		return ip, nil
	}
	st := s.Status()
	why := st.Reason
	if st.Message != "" {
		why += ": " + st.Message
	}
	if why == "" {
		why = "no pod IP yet"
	}
	return "", fmt.Errorf("sandbox %s/%s (%s): %w", s.ns, s.name, why, ErrNotReady)
}

// HandleFor wraps a SandboxClaim or Sandbox the caller already has (from a
// List, an informer or a watch) in a handle, without reading the API.
func (c *Client) HandleFor(obj client.Object) (*Sandbox, error) {
	switch o := obj.(type) {
	case *extv1alpha1.SandboxClaim:
		if o.Namespace == "" {
			o = o.DeepCopy()
			o.Namespace = c.ns
		}
		return c.claimHandle(o), nil
	case *agentsv1alpha1.Sandbox:
		if o.Namespace == "" {
			o = o.DeepCopy()
			o.Namespace = c.ns
		}
		return c.sandboxHandle(o), nil
	}
	return nil, fmt.Errorf("HandleFor: want a *SandboxClaim or *Sandbox, got %T", obj)
}
