package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// Egress is the outbound network mode of a Sandbox created without a claim
// (the harness flow's config.network): EgressAllowAll, EgressDenyAll or
// EgressRestricted(cidrs...). The controller enforces it with a
// NetworkPolicy named after the Sandbox, made before the pod and deleted
// with the Sandbox (docs/egress.md). It is written as the annotations
// agents.x-k8s.io/egress and agents.x-k8s.io/egress-cidrs.
type Egress struct {
	spec egress.Spec
	err  error
}

var (
	// EgressAllowAll puts no limit on egress: no policy (an existing one is
	// deleted).
	EgressAllowAll = Egress{spec: egress.Spec{Mode: egress.AllowAll}}
	// EgressDenyAll blocks all egress, DNS included.
	EgressDenyAll = Egress{spec: egress.Spec{Mode: egress.DenyAll}}
)

// EgressRestrictedTo allows egress to the given CIDRs and host names
// ("pypi.org", "*.github.com": one label below github.com), and DNS to the
// cluster DNS; nothing else. Names are enforced where the cluster can
// (Cilium); elsewhere the sandbox gets no pod, unless failOpen lets it run
// with egress open to everything allow-all allows (docs/egress.md, "Domains").
func EgressRestrictedTo(cidrs, domains []string, failOpen bool) Egress {
	spec, err := egress.New(egress.Restricted, cidrs)
	if err == nil {
		spec, err = spec.WithDomains(domains, failOpen)
	}
	return Egress{spec: spec, err: err}
}

// EgressRestricted allows egress to the given CIDRs ("10.0.0.0/8",
// "2001:db8::/32"; a bare address is one host) and DNS (UDP and TCP port
// 53) to any address; nothing else. Without CIDRs it allows DNS alone. An
// invalid CIDR makes the call that uses it fail before anything is written.
func EgressRestricted(cidrs ...string) Egress {
	spec, err := egress.New(egress.Restricted, cidrs)
	return Egress{spec: spec, err: err}
}

// ParseEgress builds an Egress from its annotation form: mode is
// "allow-all", "deny-all" or "restricted"; cidrs are for restricted only.
func ParseEgress(mode string, cidrs ...string) (Egress, error) {
	spec, err := egress.New(mode, cidrs)
	if err != nil {
		return Egress{}, err
	}
	return Egress{spec: spec}, nil
}

// Mode is "allow-all", "deny-all" or "restricted" ("" for the zero value).
func (e Egress) Mode() string { return e.spec.Mode }

// CIDRs are the destinations restricted mode allows, in canonical form.
func (e Egress) CIDRs() []string { return slices.Clone(e.spec.CIDRs) }

// Domains are the host names restricted mode allows, in canonical form.
func (e Egress) Domains() []string { return slices.Clone(e.spec.Domains) }

// String is "deny-all", "allow-all" or "restricted to 10.0.0.0/8,…".
func (e Egress) String() string { return e.spec.Summary() }

// Validate reports why e cannot be used (an invalid CIDR, the zero value).
func (e Egress) Validate() error {
	if e.err != nil {
		return e.err
	}
	spec, err := egress.New(e.spec.Mode, e.spec.CIDRs)
	if err == nil && len(e.spec.Domains) > 0 {
		_, err = spec.WithDomains(e.spec.Domains, e.spec.DomainsFailOpen)
	}
	return err
}

// Annotations are the Sandbox annotations that ask for e, for callers that
// write Sandboxes themselves (kubectl, client-go).
func (e Egress) Annotations() map[string]string { return e.spec.Annotations() }

// WithEgress sets the egress mode of a Sandbox made by CreateSandbox or
// GetOrCreateSandbox; the pod starts only once the policy is in place, and
// the call returns once the controller reports the mode in force. When
// GetOrCreateSandbox finds the Sandbox, a different mode is written to it
// too: a caller asking for deny-all never gets an open sandbox. Claims
// refuse it: a claim's sandbox follows its template's networkPolicy.
func WithEgress(e Egress) CreateOption {
	return createFunc(func(c *createConfig) { c.egress = &e })
}

// errEgressOnClaim refuses egress modes for claims.
var errEgressOnClaim = errors.New("egress modes apply to Sandboxes created without a claim (CreateSandbox, GetOrCreateSandbox); a claim's sandbox follows its template's networkPolicy")

// SetEgress changes the egress mode of a sandbox created without a claim
// and waits, within the ready timeout, until the controller reports the new
// mode in force (the NetworkPolicy is written; a paused sandbox counts).
func (s *Sandbox) SetEgress(ctx context.Context, e Egress, opts ...WaitOption) error {
	if !s.raw {
		return fmt.Errorf("set egress of sandboxclaim %s/%s: %w", s.ns, s.name, errEgressOnClaim)
	}
	if err := e.Validate(); err != nil {
		return fmt.Errorf("set egress of sandbox %s/%s: %w", s.ns, s.name, err)
	}
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}}
	if err := s.c.kube.Patch(ctx, sb, egressPatch(e)); err != nil {
		return kubeErr(err, "setting the egress of sandbox %s/%s", s.ns, s.name)
	}
	s.setSandbox(sb)
	var wc waitConfig
	for _, o := range opts {
		if o != nil {
			o.applyWait(&wc)
		}
	}
	eval := func(sb *agentsv1alpha1.Sandbox) readiness { return egressInForce(sb, e.spec) }
	got, err := waitFor(ctx, s.c, sb, func() client.ObjectList { return &agentsv1alpha1.SandboxList{} }, eval, wc)
	s.setSandbox(got)
	return err
}

// SetEgress sets the egress mode of the Sandbox called name (one created
// without a claim); see Sandbox.SetEgress.
func (c *Client) SetEgress(ctx context.Context, name string, e Egress, opts ...WaitOption) error {
	s, err := c.Get(ctx, name)
	if err != nil {
		return err
	}
	return s.SetEgress(ctx, e, opts...)
}

// egressPatch sets the egress annotations; the CIDR and domain lists (and
// fail-open) are removed unless restricted mode has them, so no leftover
// list of an earlier mode applies.
func egressPatch(e Egress) client.Patch {
	ann := map[string]*string{agentsv1alpha1.EgressAnnotation: nil, agentsv1alpha1.EgressCIDRsAnnotation: nil,
		agentsv1alpha1.EgressDomainsAnnotation: nil, agentsv1alpha1.EgressDomainsFailOpenAnnotation: nil}
	for k, v := range e.Annotations() {
		ann[k] = &v
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return client.RawPatch(types.MergePatchType, data)
}

// ensureEgress writes e to a found Sandbox whose annotations ask for
// something else, updating sb in place.
func (c *Client) ensureEgress(ctx context.Context, sb *agentsv1alpha1.Sandbox, e Egress) error {
	if have, requested, err := egress.FromAnnotations(sb.Annotations); err == nil && requested &&
		have.Summary() == e.spec.Summary() {
		return nil
	}
	if err := c.kube.Patch(ctx, sb, egressPatch(e)); err != nil {
		return kubeErr(err, "setting the egress of sandbox %s/%s", sb.Namespace, sb.Name)
	}
	return nil
}

// Reasons the SDK reports while the egress mode is not in force yet.
const reasonWaitingForEgress = "WaitingForEgressPolicy"

// egressInForce: ready once the EgressPolicy condition says spec is in
// force. Invalid annotations, and annotations the Sandbox's template does
// not allow, are final; someone else's policy in the way may still be
// removed, so it is waited out.
func egressInForce(sb *agentsv1alpha1.Sandbox, spec egress.Spec) readiness {
	r := readiness{sandboxName: sb.Name, podIPs: sb.Status.PodIPs}
	cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionEgressPolicy)
	switch {
	case sb.DeletionTimestamp != nil:
		r.reason, r.message, r.final = reasonTerminating, "the sandbox is being deleted", true
	case cond != nil && cond.Status == metav1.ConditionTrue && spec.Applied(cond.Message):
		r.ready = true
	case cond != nil && cond.Status == metav1.ConditionFalse:
		r.reason, r.message = cond.Reason, cond.Message
		// A cluster that cannot enforce names will not learn to before the controller restarts.
		r.final = cond.Reason == agentsv1alpha1.ReasonInvalidEgress || cond.Reason == agentsv1alpha1.ReasonEgressIgnored ||
			cond.Reason == agentsv1alpha1.ReasonEgressDomainsUnenforceable
	default:
		r.reason, r.message = reasonWaitingForEgress, "the controller has not reported egress "+spec.Summary()+" in force yet"
	}
	return r
}

// withEgress holds back a sandbox that is otherwise ready until the egress
// mode its annotations ask for is in force.
func withEgress(sb *agentsv1alpha1.Sandbox, r readiness) readiness {
	if !r.ready {
		return r
	}
	spec, requested, err := egress.FromAnnotations(sb.Annotations)
	switch {
	case !requested:
		return r
	case err != nil:
		r.ready, r.final, r.reason, r.message = false, true, agentsv1alpha1.ReasonInvalidEgress, err.Error()
		return r
	}
	e := egressInForce(sb, spec)
	if e.ready {
		return r
	}
	r.ready, r.final, r.reason, r.message = false, e.final, e.reason, e.message
	return r
}
