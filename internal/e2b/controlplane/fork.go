package controlplane

import (
	"context"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// maxForks bounds one fork request: every fork is a pod on the parent's node.
const maxForks = 32

// forkBody is the body of POST /sandboxes/{id}/fork (E2B's SandboxForkRequest).
type forkBody struct {
	Timeout *int64 `json:"timeout,omitempty"`
	Count   *int32 `json:"count,omitempty"`
}

// values are the request's count and timeout (seconds), E2B's defaults where it has none.
func (req forkBody) values() (count int32, timeout int64, err error) {
	count, timeout = 1, 15
	if req.Count != nil {
		count = *req.Count
	}
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if count < 1 || count > maxForks {
		return 0, 0, errorf(http.StatusBadRequest, "count must be 1..%d, not %d", maxForks, count)
	}
	if timeout <= 0 || timeout > maxTimeout {
		return 0, 0, errorf(http.StatusBadRequest, "timeout must be 1..%d seconds, not %d", maxTimeout, timeout)
	}
	return count, timeout, nil
}

// forkResult is one entry of the answer (E2B's SandboxForkResult): the fork, or why it did not
// start.
type forkResult struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
	Error   *errorJSON   `json:"error,omitempty"`
}

// fork is E2B's fork: count new sandboxes that start with the running sandbox's processes and
// memory (docs/snapshots.md, "Fork"). Each is a claim of the parent's template whose Sandbox the
// controller restores from a save of the parent; admission lets the key fork only a sandbox it
// may run code in. A fork that could not get the memory is deleted and reported as an error,
// as E2B reports each fork's outcome on its own.
func (s *server) fork(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req forkBody
	if err := decode(r, &req); err != nil {
		return err
	}
	count, timeout, err := req.values()
	if err != nil {
		return err
	}
	parent, err := s.find(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	if state(parent.sandbox) == statePaused {
		return errorf(http.StatusConflict, "sandbox %q is paused: only a running sandbox is forked", parent.sandbox.Name)
	}
	claims := make([]*extv1alpha1.SandboxClaim, count)
	for i := range claims {
		claims[i] = s.forkClaim(parent, timeout)
		if err := c.kube.Create(r.Context(), claims[i]); err != nil {
			// Refused before any fork started (admission, quota): the whole request fails.
			s.deleteClaims(r.Context(), c, claims[:i])
			return err
		}
	}
	results := make([]forkResult, count)
	var wg sync.WaitGroup
	for i, claim := range claims {
		wg.Go(func() { results[i] = s.forkOutcome(r.Context(), c, claim) })
	}
	wg.Wait()
	writeJSON(w, http.StatusCreated, results)
	return nil
}

// forkClaim is a claim of the parent's template, with its metadata, that forks its Sandbox.
func (s *server) forkClaim(parent *e2bSandbox, timeout int64) *extv1alpha1.SandboxClaim {
	claim := s.newClaim(parent.sandbox.Namespace, parent.claim.Spec.TemplateRef.Name, timeout)
	claim.Annotations[agentsv1beta1.ForkOfAnnotation] = parent.sandbox.Name
	if meta, ok := parent.claim.Annotations[metadataAnnotation]; ok {
		claim.Annotations[metadataAnnotation] = meta
	}
	return claim
}

// forkOutcome waits for one fork and answers with it, or with why it did not start with the
// parent's memory (and deletes it).
func (s *server) forkOutcome(ctx context.Context, c *caller, claim *extv1alpha1.SandboxClaim) forkResult {
	e, err := s.waitReady(ctx, c, claim)
	if err == nil {
		err = forkedWithMemory(e.sandbox)
	}
	var out sandboxJSON
	if err == nil {
		out, err = s.answer(e)
	}
	if err != nil {
		s.deleteClaims(ctx, c, []*extv1alpha1.SandboxClaim{claim})
		return forkResult{Error: errorBody(err)}
	}
	return forkResult{Sandbox: &out}
}

// forkedWithMemory: the fork's MemoryKept condition says its pod was restored from the parent.
// The controller writes it in the same status as Ready.
func forkedWithMemory(sb *agentsv1beta1.Sandbox) error {
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept)
	switch {
	case c != nil && c.Reason == agentsv1beta1.ReasonMemoryRestored:
		return nil
	case c != nil:
		return errorf(http.StatusInternalServerError, "the fork started without the sandbox's memory (%s): %s", c.Reason, c.Message)
	}
	return errorf(http.StatusNotImplemented, "the fork started without the sandbox's memory: this cluster saves none (no node agent, docs/snapshots.md)")
}

func (s *server) deleteClaims(ctx context.Context, c *caller, claims []*extv1alpha1.SandboxClaim) {
	ctx = context.WithoutCancel(ctx)
	for _, claim := range claims {
		if err := c.kube.Delete(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
			s.log.Info("deleting a fork that did not start", "claim", claim.Name, "err", err)
		}
	}
}
