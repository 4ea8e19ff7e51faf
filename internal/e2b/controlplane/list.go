package controlplane

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

const (
	defaultListLimit = 100
	maxListLimit     = 1000
	nextTokenHeader  = "X-Next-Token"
)

// listQuery is what GET /v2/sandboxes filters by.
type listQuery struct {
	metadata map[string]string
	states   []string // empty: every state
	template string
	limit    int
	offset   int
}

// list answers the key's namespace's E2B sandboxes, oldest first, a page at a time: the next
// page's token comes back in X-Next-Token.
func (s *server) list(w http.ResponseWriter, r *http.Request, c *caller) error {
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	claims := &extv1alpha1.SandboxClaimList{}
	if err := c.kube.List(r.Context(), claims, client.InNamespace(c.namespace), client.MatchingLabels{sandboxLabel: "true"}); err != nil {
		return err
	}
	sandboxes := &agentsv1beta1.SandboxList{}
	if err := c.kube.List(r.Context(), sandboxes, client.InNamespace(c.namespace)); err != nil {
		return err
	}
	byName := map[string]*agentsv1beta1.Sandbox{}
	for i := range sandboxes.Items {
		byName[sandboxes.Items[i].Name] = &sandboxes.Items[i]
	}
	var all []listedSandbox
	for i := range claims.Items {
		claim := &claims.Items[i]
		sb := byName[claim.Status.SandboxStatus.Name]
		if sb == nil || !claim.DeletionTimestamp.IsZero() || !sb.DeletionTimestamp.IsZero() {
			continue
		}
		if item := s.listed(&e2bSandbox{claim: claim, sandbox: sb}); q.matches(item) {
			all = append(all, item)
		}
	}
	slices.SortFunc(all, func(a, b listedSandbox) int {
		return strings.Compare(a.StartedAt+a.SandboxID, b.StartedAt+b.SandboxID)
	})
	page := all[min(q.offset, len(all)):]
	if len(page) > q.limit {
		page = page[:q.limit]
		w.Header().Set(nextTokenHeader, strconv.Itoa(q.offset+q.limit))
	}
	if page == nil {
		page = []listedSandbox{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// parseListQuery reads metadata (one URL-encoded k=v&k2=v2 parameter), state (a comma list, or
// repeated), template, limit and nextToken.
func parseListQuery(v url.Values) (listQuery, error) {
	q := listQuery{limit: defaultListLimit}
	if raw := v.Get("metadata"); raw != "" {
		pairs, err := url.ParseQuery(raw)
		if err != nil {
			return q, errorf(http.StatusBadRequest, "metadata must be URL-encoded key=value pairs: %v", err)
		}
		q.metadata = map[string]string{}
		for k, vs := range pairs {
			q.metadata[k] = vs[len(vs)-1]
		}
	}
	for _, raw := range v["state"] {
		for _, st := range strings.Split(raw, ",") {
			if st != stateRunning && st != statePaused {
				return q, errorf(http.StatusBadRequest, "state must be running or paused, not %q", st)
			}
			q.states = append(q.states, st)
		}
	}
	q.template = v.Get("template")
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxListLimit {
			return q, errorf(http.StatusBadRequest, "limit must be 1..%d, not %q", maxListLimit, raw)
		}
		q.limit = n
	}
	if raw := v.Get("nextToken"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 {
			return q, errorf(http.StatusBadRequest, "nextToken %q is not one this API gave", raw)
		}
		q.offset = n
	}
	return q, nil
}

func (q listQuery) matches(item listedSandbox) bool {
	if len(q.states) > 0 && !slices.Contains(q.states, item.State) {
		return false
	}
	if q.template != "" && q.template != item.TemplateID {
		return false
	}
	for k, v := range q.metadata {
		if item.Metadata[k] != v {
			return false
		}
	}
	return true
}
