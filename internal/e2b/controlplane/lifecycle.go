package controlplane

import (
	"context"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// get answers SandboxDetail, with a fresh access token.
func (s *server) get(w http.ResponseWriter, r *http.Request, c *caller) error {
	e, err := s.find(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	token, err := s.token(e)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sandboxDetail{listedSandbox: s.listed(e), EnvdAccessToken: token, Domain: s.domain})
	return nil
}

// kill deletes the claim; its Sandbox, pod and volumes go with it.
func (s *server) kill(w http.ResponseWriter, r *http.Request, c *caller) error {
	e, err := s.find(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	uid := e.claim.UID
	if err := c.kube.Delete(r.Context(), e.claim, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// setTimeout moves the claim's shutdown to now + timeout seconds, earlier or later.
func (s *server) setTimeout(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body timeoutBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Timeout == nil {
		return errorf(http.StatusBadRequest, "timeout is required (seconds)")
	}
	e, err := s.find(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.shutdownIn(r.Context(), c, e, *body.Timeout, false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refresh (E2B's keep-alive, POST /sandboxes/{id}/refreshes {"duration"}) extends the timeout.
func (s *server) refresh(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body struct {
		Duration *int64 `json:"duration,omitempty"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	e, err := s.find(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	d := int64(60)
	if body.Duration != nil {
		d = *body.Duration
	}
	if err := s.shutdownIn(r.Context(), c, e, d, true); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// shutdownIn sets the claim's shutdown time to now + seconds; onlyLater keeps a later one.
func (s *server) shutdownIn(ctx context.Context, c *caller, e *e2bSandbox, seconds int64, onlyLater bool) error {
	if seconds <= 0 || seconds > maxTimeout {
		return errorf(http.StatusBadRequest, "timeout must be 1..%d seconds, not %d", maxTimeout, seconds)
	}
	at := s.clock.Now().Add(time.Duration(seconds) * time.Second).Truncate(time.Second)
	if onlyLater && !at.After(s.endAt(e.claim)) {
		return nil
	}
	patch := client.MergeFrom(e.claim.DeepCopy())
	if e.claim.Spec.Lifecycle == nil {
		e.claim.Spec.Lifecycle = &extv1alpha1.Lifecycle{ShutdownPolicy: extv1alpha1.ShutdownPolicyDelete}
	}
	e.claim.Spec.Lifecycle.ShutdownTime = &metav1.Time{Time: at}
	return c.kube.Patch(ctx, e.claim, patch)
}

// pause is our pause: the Sandbox scaled to nothing, its volumes kept. As E2B's, it keeps the
// sandbox's memory unless the body says memory: false (agents.x-k8s.io/pause-mode KeepMemory:
// on gVisor with the node agent, its processes come back at the resume; elsewhere it resumes
// cold and says why in its MemoryKept condition, docs/snapshots.md).
func (s *server) pause(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body pauseBody
	if err := decode(r, &body); err != nil {
		return err
	}
	e, err := s.find(r.Context(), c, r.PathValue("id"))
	if err != nil {
		return err
	}
	if state(e.sandbox) == statePaused {
		return errorf(http.StatusConflict, "sandbox %q is already paused", e.sandbox.Name)
	}
	mode := agentsv1beta1.PauseModeKeepMemory
	if body.Memory != nil && !*body.Memory {
		mode = agentsv1beta1.PauseModeDelete
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+agentsv1beta1.PauseModeAnnotation+`":"`+mode+
		`"}},"spec":{"operatingMode":"`+string(agentsv1beta1.SandboxOperatingModeSuspended)+`"}}`))
	if err := c.kube.Patch(r.Context(), e.sandbox, patch); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connect resumes a paused sandbox and waits until it is ready, moves its timeout when the
// request's is later, and answers with a fresh access token: created (resumed) or ok.
func (s *server) connect(runningCode int) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		var body timeoutBody
		if err := decode(r, &body); err != nil {
			return err
		}
		if body.Memory != nil && !*body.Memory {
			return errorf(http.StatusBadRequest, "memory=false at the resume is not supported: what a resume keeps is chosen at the pause (pause with memory=false for a resume from disk only)")
		}
		e, err := s.find(r.Context(), c, r.PathValue("id"))
		if err != nil {
			return err
		}
		timeout := int64(300)
		if body.Timeout != nil {
			timeout = *body.Timeout
		}
		if err := s.shutdownIn(r.Context(), c, e, timeout, true); err != nil {
			return err
		}
		code := runningCode
		if state(e.sandbox) == statePaused {
			if e, err = s.resume(r.Context(), c, e); err != nil {
				return err
			}
			code = http.StatusCreated
		}
		out, err := s.answer(e)
		if err != nil {
			return err
		}
		writeJSON(w, code, out)
		return nil
	}
}

// resume scales the Sandbox back up and watches it until its new pod is ready (the watch starts
// with the Sandbox as it is, so a pod that was quick is not missed).
func (s *server) resume(ctx context.Context, c *caller, e *e2bSandbox) (*e2bSandbox, error) {
	if err := s.setMode(ctx, c, e.sandbox, agentsv1beta1.SandboxOperatingModeRunning); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.readyTimeout)
	defer cancel()
	w, err := c.kube.Watch(ctx, &agentsv1beta1.SandboxList{}, client.InNamespace(e.sandbox.Namespace),
		client.MatchingFields{"metadata.name": e.sandbox.Name})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, errorf(http.StatusGatewayTimeout, "sandbox %q not ready within %s of resuming", e.sandbox.Name, s.readyTimeout)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, errorf(http.StatusGatewayTimeout, "sandbox %q: the watch ended before it was ready", e.sandbox.Name)
			}
			if sb, isSandbox := ev.Object.(*agentsv1beta1.Sandbox); isSandbox && readySinceResumed(sb) {
				return &e2bSandbox{claim: e.claim, sandbox: sb}, nil
			}
		}
	}
}

// readySinceResumed: Ready, as the controller found it once it had seen the resume. A Ready
// written before (the pause not reconciled yet, or its memory still being saved) is the pod
// that is about to go, and answering with it would send the caller's next command there.
func readySinceResumed(sb *agentsv1beta1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady)
	return ready(sb) && c != nil && c.ObservedGeneration >= sb.Generation
}

func (s *server) setMode(ctx context.Context, c *caller, sb *agentsv1beta1.Sandbox, mode agentsv1beta1.SandboxOperatingMode) error {
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"operatingMode":"`+string(mode)+`"}}`))
	return c.kube.Patch(ctx, sb, patch)
}
