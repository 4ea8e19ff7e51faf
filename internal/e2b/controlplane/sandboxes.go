package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

const (
	// sandboxLabel marks the claims made through E2B's API: list shows only those.
	sandboxLabel = "e2b.agents.x-k8s.io/sandbox"
	// metadataAnnotation holds the sandbox's E2B metadata as a JSON object of strings.
	metadataAnnotation = "e2b.agents.x-k8s.io/metadata"
	// maxTokenLife caps an envd access token: a connect renews it.
	maxTokenLife = 24 * time.Hour
)

// e2bSandbox is one E2B sandbox: its claim and the Sandbox serving it.
type e2bSandbox struct {
	claim   *extv1alpha1.SandboxClaim
	sandbox *agentsv1beta1.Sandbox
}

// find looks id up in the caller's namespace: the Sandbox of that name, controlled by a claim
// made through E2B's API and not being deleted. Anything else is not found.
func (s *server) find(ctx context.Context, c *caller, id string) (*e2bSandbox, error) {
	if len(validation.IsDNS1123Label(id)) > 0 {
		return nil, notFound(id)
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: id}, sb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound(id)
		}
		return nil, err
	}
	owner := metav1.GetControllerOf(sb)
	if owner == nil || owner.Kind != "SandboxClaim" || !sb.DeletionTimestamp.IsZero() {
		return nil, notFound(id)
	}
	claim := &extv1alpha1.SandboxClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: owner.Name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound(id)
		}
		return nil, err
	}
	if claim.UID != owner.UID || claim.Labels[sandboxLabel] != "true" || !claim.DeletionTimestamp.IsZero() {
		return nil, notFound(id)
	}
	return &e2bSandbox{claim: claim, sandbox: sb}, nil
}

// state is E2B's word for the Sandbox's: paused when its pod is scaled away.
func state(sb *agentsv1beta1.Sandbox) string {
	if sb.DesiredReplicas() == agentsv1beta1.PausedReplicas {
		return statePaused
	}
	return stateRunning
}

// endAt is when the claim shuts down; a claim without a shutdown time never does, reported as
// a year from now.
func (s *server) endAt(claim *extv1alpha1.SandboxClaim) time.Time {
	if claim.Spec.Lifecycle != nil && claim.Spec.Lifecycle.ShutdownTime != nil {
		return claim.Spec.Lifecycle.ShutdownTime.Time
	}
	return s.clock.Now().Add(365 * 24 * time.Hour)
}

// listed is the sandbox as E2B's list shows it.
func (s *server) listed(e *e2bSandbox) listedSandbox {
	cpu, mem, disk := resources(e.sandbox)
	tmpl := e.claim.Spec.TemplateRef.Name
	return listedSandbox{
		TemplateID: tmpl, Alias: tmpl, SandboxID: e.sandbox.Name, ClientID: clientID,
		StartedAt: e.claim.CreationTimestamp.UTC().Format(time.RFC3339), EndAt: s.endAt(e.claim).UTC().Format(time.RFC3339),
		CPUCount: cpu, MemoryMB: mem, DiskSizeMB: disk, Metadata: metadataOf(e.claim), State: state(e.sandbox),
		EnvdVersion: s.envdVersion,
	}
}

// answer is the sandbox as create and connect return it, with a fresh access token.
func (s *server) answer(e *e2bSandbox) (sandboxJSON, error) {
	token, err := s.token(e)
	if err != nil {
		return sandboxJSON{}, err
	}
	tmpl := e.claim.Spec.TemplateRef.Name
	return sandboxJSON{TemplateID: tmpl, Alias: tmpl, SandboxID: e.sandbox.Name, ClientID: clientID,
		EnvdVersion: s.envdVersion, EnvdAccessToken: token, Domain: s.domain}, nil
}

// token mints the envd access token: the router opens this Sandbox (by UID) with it, until the
// claim shuts down, at most maxTokenLife.
func (s *server) token(e *e2bSandbox) (string, error) {
	now := s.clock.Now()
	exp := s.endAt(e.claim)
	if limit := now.Add(maxTokenLife); exp.After(limit) {
		exp = limit
	}
	return s.signer.Mint(scopedtoken.Claims{Namespace: e.sandbox.Namespace, Name: e.sandbox.Name, UID: string(e.sandbox.UID),
		IssuedAt: now.Unix(), Expires: exp.Unix()})
}

// resources are the CPU cores, MiB of memory and MiB of ephemeral storage the sandbox's
// containers request (limits where nothing is requested); 0 when unset.
func resources(sb *agentsv1beta1.Sandbox) (cpu, memMB, diskMB int64) {
	for _, ctr := range sb.Spec.PodTemplate.Spec.Containers {
		pick := func(name corev1.ResourceName) int64 {
			q, ok := ctr.Resources.Requests[name]
			if !ok {
				q, ok = ctr.Resources.Limits[name]
			}
			if !ok {
				return 0
			}
			if name == corev1.ResourceCPU {
				return (q.MilliValue() + 999) / 1000
			}
			return q.Value() >> 20
		}
		cpu += pick(corev1.ResourceCPU)
		memMB += pick(corev1.ResourceMemory)
		diskMB += pick(corev1.ResourceEphemeralStorage)
	}
	return cpu, memMB, diskMB
}

func metadataOf(claim *extv1alpha1.SandboxClaim) map[string]string {
	var m map[string]string
	if raw := claim.Annotations[metadataAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &m) // we wrote it; a hand-edited one shows as none
	}
	return m
}

// claimReady reports whether the claim is served by a Ready Sandbox, and a refusal when its
// Ready condition says it never will be.
func claimReady(claim *extv1alpha1.SandboxClaim) (bool, error) {
	ready := meta.FindStatusCondition(claim.Status.Conditions, extv1alpha1.ClaimConditionReady)
	if ready == nil {
		return false, nil
	}
	if ready.Status == metav1.ConditionTrue && claim.Status.SandboxStatus.Name != "" {
		return true, nil
	}
	switch ready.Reason {
	case extv1alpha1.ReasonTemplateNotFound:
		return false, &apiError{code: http.StatusBadRequest, templateMissing: true,
			msg: fmt.Sprintf("template %q not found: %s", claim.Spec.TemplateRef.Name, ready.Message)}
	case extv1alpha1.ReasonEnvVarsInjectionRejected, extv1alpha1.ReasonInvalidMetadata:
		return false, errorf(http.StatusBadRequest, "%s: %s", ready.Reason, ready.Message)
	case extv1alpha1.ReasonClaimExpired:
		return false, errorf(http.StatusGone, "the sandbox expired: %s", ready.Message)
	}
	return false, nil
}

// ready is a running Sandbox whose pod is ready and has an address.
func ready(sb *agentsv1beta1.Sandbox) bool {
	return sb.DesiredReplicas() != agentsv1beta1.PausedReplicas &&
		meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) && len(sb.Status.PodIPs) > 0
}
