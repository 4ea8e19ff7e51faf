package access

import (
	"context"
	"fmt"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// heldRights are the rights that let a caller reach a Sandbox through the router, in the order
// they are asked. Each already gives what the router gives: sandboxes/proxy is the router's own
// right; patch or update of the Sandbox can replace its pod template with any code; create on
// pods/portforward of its pod reaches every port of it. Name and namespace are the Sandbox's
// (its pod has its name).
var heldRights = []authzv1.ResourceAttributes{
	{Verb: ProxyVerb, Group: ProxyGroup, Resource: ProxyResource, Subresource: ProxySubresource},
	{Verb: "patch", Group: ProxyGroup, Resource: ProxyResource},
	{Verb: "update", Group: ProxyGroup, Resource: ProxyResource},
	{Verb: "create", Group: "", Resource: "pods", Subresource: "portforward"},
}

// HeldRightsText names every right of heldRights on the Sandbox namespace/name, for a 403.
func HeldRightsText(namespace, name string) string {
	parts := make([]string, len(heldRights))
	for i, a := range heldRights {
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		if a.Group != "" {
			res += "." + a.Group
		}
		parts[i] = fmt.Sprintf("%s %s", a.Verb, res)
	}
	return fmt.Sprintf("%s on %s/%s", strings.Join(parts, ", "), namespace, name)
}

// HeldRightsReviewer allows a user who holds any of heldRights on the Sandbox, asking the API
// server one SubjectAccessReview at a time and stopping at the first allow. Any error fails the
// whole review (503): an unanswered question is never taken as an allow.
type HeldRightsReviewer struct {
	Client authzv1client.SubjectAccessReviewInterface
}

func (k *HeldRightsReviewer) Review(ctx context.Context, user authnv1.UserInfo, namespace, name string) (bool, error) {
	for _, attrs := range heldRights {
		attrs.Namespace, attrs.Name = namespace, name
		allowed, err := subjectAccessReview(ctx, k.Client, user, attrs)
		if err != nil || allowed {
			return allowed, err
		}
	}
	return false, nil
}

// subjectAccessReview asks whether user may do attrs.
func subjectAccessReview(ctx context.Context, c authzv1client.SubjectAccessReviewInterface, user authnv1.UserInfo, attrs authzv1.ResourceAttributes) (bool, error) {
	extra := make(map[string]authzv1.ExtraValue, len(user.Extra))
	for key, v := range user.Extra {
		extra[key] = authzv1.ExtraValue(v)
	}
	res, err := c.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra, ResourceAttributes: &attrs,
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	return res.Status.Allowed && !res.Status.Denied, nil
}
