package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

const (
	templateGrace    = 2 * time.Second
	maxTimeout       = 24 * 60 * 60 // seconds: E2B's own cap
	maxMetadataBytes = 16 << 10
	maxMetadataKeys  = 64
)

// create makes a claim of the template and answers once a Sandbox serves it; defaultTimeout
// is the API version's default lifetime in seconds.
func (s *server) create(defaultTimeout int64) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		var req newSandbox
		if err := decode(r, &req); err != nil {
			return err
		}
		claim, err := s.claimFor(&req, c.namespace, defaultTimeout)
		if err != nil {
			return err
		}
		start := s.clock.Now()
		if err := c.kube.Create(r.Context(), claim); err != nil {
			return err
		}
		created := s.clock.Since(start)
		e, err := s.waitReady(r.Context(), c, claim)
		s.log.Info("e2b create", "claim", claim.Name, "createMs", created.Milliseconds(), "readyMs", s.clock.Since(start).Milliseconds())
		if err != nil {
			// Nobody will use it: it must not linger until its timeout, holding a warm member.
			_ = c.kube.Delete(context.WithoutCancel(r.Context()), claim)
			return err
		}
		out, err := s.answer(e)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, out)
		return nil
	}
}

// claimFor validates a create request and turns it into a claim.
func (s *server) claimFor(req *newSandbox, ns string, defaultTimeout int64) (*extv1alpha1.SandboxClaim, error) {
	if err := unsupportedFields(req); err != nil {
		return nil, err
	}
	if req.TemplateID == "" || len(validation.IsDNS1123Subdomain(req.TemplateID)) > 0 {
		return nil, errorf(http.StatusBadRequest, "templateID %q is not the name of a SandboxTemplate", req.TemplateID)
	}
	timeout := defaultTimeout
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout <= 0 || timeout > maxTimeout {
		return nil, errorf(http.StatusBadRequest, "timeout must be 1..%d seconds, not %d", maxTimeout, timeout)
	}
	meta, err := metadataJSON(req.Metadata)
	if err != nil {
		return nil, err
	}
	claim := s.newClaim(ns, req.TemplateID, timeout)
	if meta != "" {
		claim.Annotations[metadataAnnotation] = meta
	}
	for _, k := range sortedKeys(req.EnvVars) {
		claim.Spec.Env = append(claim.Spec.Env, extv1alpha1.EnvVar{Name: k, Value: req.EnvVars[k]})
	}
	return claim, nil
}

// newClaim is an E2B sandbox's claim of template: labelled as E2B's, deleted timeout seconds
// from now.
func (s *server) newClaim(ns, template string, timeout int64) *extv1alpha1.SandboxClaim {
	return &extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "e2b-", Labels: map[string]string{sandboxLabel: "true"},
			Annotations: map[string]string{}},
		Spec: extv1alpha1.SandboxClaimSpec{
			TemplateRef: extv1alpha1.SandboxTemplateRef{Name: template},
			Lifecycle: &extv1alpha1.Lifecycle{ShutdownPolicy: extv1alpha1.ShutdownPolicyDelete,
				ShutdownTime: &metav1.Time{Time: s.clock.Now().Add(time.Duration(timeout) * time.Second).Truncate(time.Second)}},
		},
	}
}

// unsupportedFields refuses what E2B offers and a claim cannot do, naming the alternative.
func unsupportedFields(req *newSandbox) error {
	switch {
	case req.AutoPause != nil && *req.AutoPause:
		return errorf(http.StatusBadRequest, "autoPause is not supported: pause explicitly, or give the template an idle timeout (docs/idle.md)")
	case len(req.AutoResume) > 0 && string(req.AutoResume) != "null":
		return errorf(http.StatusBadRequest, "autoResume is not supported: annotate the template agents.x-k8s.io/wake-on-request (docs/idle.md)")
	case len(req.Network) > 0 && string(req.Network) != "null":
		return errorf(http.StatusBadRequest, "network is not supported per sandbox: egress is the template's (docs/egress.md)")
	case req.AllowInternetAccess != nil && !*req.AllowInternetAccess:
		return errorf(http.StatusBadRequest, "allow_internet_access=false is not supported per sandbox: use a template whose egress denies it (docs/egress.md)")
	case len(req.VolumeMounts) > 0 && string(req.VolumeMounts) != "null" && string(req.VolumeMounts) != "[]":
		return errorf(http.StatusBadRequest, "volumeMounts are not supported: the template's volumeClaimTemplates give volumes")
	case len(req.Mcp) > 0 && string(req.Mcp) != "null":
		return errorf(http.StatusBadRequest, "mcp is not supported")
	case len(req.Iam) > 0 && string(req.Iam) != "null":
		return errorf(http.StatusBadRequest, "iam is not supported: the template's ServiceAccount decides")
	}
	return nil
}

// metadataJSON checks E2B metadata and encodes it for the claim's annotation ("" for none).
func metadataJSON(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	if len(m) > maxMetadataKeys {
		return "", errorf(http.StatusBadRequest, "metadata has %d keys, at most %d", len(m), maxMetadataKeys)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if len(b) > maxMetadataBytes {
		return "", errorf(http.StatusBadRequest, "metadata is %d bytes as JSON, at most %d", len(b), maxMetadataBytes)
	}
	return string(b), nil
}

// waitReady watches the claim until a Ready Sandbox serves it, its Ready condition says it
// never will, or ReadyTimeout passes.
func (s *server) waitReady(ctx context.Context, c *caller, claim *extv1alpha1.SandboxClaim) (*e2bSandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, s.readyTimeout)
	defer cancel()
	w, err := c.kube.Watch(ctx, &extv1alpha1.SandboxClaimList{}, client.InNamespace(claim.Namespace),
		client.MatchingFields{"metadata.name": claim.Name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: claim.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	last := claim
	// A template made moments ago may not be in the controller's cache yet: its "not found"
	// counts only once it has stood for templateGrace (the claim is reconciled again when the
	// template shows up).
	var grace <-chan time.Time
	var graceErr error
	for {
		select {
		case <-ctx.Done():
			return nil, s.notReady(last)
		case <-grace:
			return nil, graceErr
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, s.notReady(last) // the watch ended early: answer with what we know
			}
			got, isClaim := ev.Object.(*extv1alpha1.SandboxClaim)
			if ev.Type == watch.Deleted {
				return nil, errorf(http.StatusGone, "the sandbox's claim %s was deleted while it started", claim.Name)
			}
			if !isClaim {
				continue
			}
			last = got
			ready, err := claimReady(got)
			var ae *apiError
			switch {
			case err != nil && errors.As(err, &ae) && ae.templateMissing:
				if grace == nil {
					grace, graceErr = s.clock.After(templateGrace), err
				}
				continue
			case err != nil:
				return nil, err
			}
			grace = nil
			if ready {
				return s.served(ctx, c, got)
			}
		}
	}
}

// served reads the Sandbox a ready claim names (for its UID, which the access token binds).
func (s *server) served(ctx context.Context, c *caller, claim *extv1alpha1.SandboxClaim) (*e2bSandbox, error) {
	sb := &agentsv1beta1.Sandbox{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Status.SandboxStatus.Name}, sb); err != nil {
		return nil, err
	}
	return &e2bSandbox{claim: claim, sandbox: sb}, nil
}

// notReady is the answer when the claim is not ready in time: its Ready reason says why.
func (s *server) notReady(claim *extv1alpha1.SandboxClaim) error {
	why := "no status yet"
	for _, cond := range claim.Status.Conditions {
		if cond.Type == extv1alpha1.ClaimConditionReady {
			why = fmt.Sprintf("%s: %s", cond.Reason, cond.Message)
		}
	}
	// 504, not 503: E2B's SDK takes a 503 for a busy service and retries.
	return &apiError{code: http.StatusGatewayTimeout, msg: fmt.Sprintf("sandbox not ready within %s (%s)", s.readyTimeout, why)}
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
