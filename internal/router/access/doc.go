// Package access decides who calls the router and whether that caller may reach the Sandbox it
// routes to. It is the router's security boundary: the router's guard asks an Authenticator
// (or, for a request without a token, a PodIdentifier) for an Identity, then an Authorizer
// about that Identity and one Sandbox, and answers 401, 403 or 503 itself.
//
// Identity (who is calling):
//   - A bearer token is a Kubernetes token checked with the TokenReview API (restricted to the
//     configured audiences, checked again on the answer), the installation's one shared token
//     (compared in constant time on SHA-256 digests), or a scoped token that the controller
//     signed for one Sandbox, by namespace, name and UID, until an expiry (verified locally,
//     without an API call; malformed, forged and expired ones are 401).
//   - A request without a token is named by the pod its connection comes from: the
//     connection's own source address, never a header the caller writes. Only addresses the
//     CNI assigned to a Running pod that is not being deleted count; a host-network pod's (the
//     node's), a loopback, an unknown address, or one two live pods claim names nobody. The
//     pod is then its ServiceAccount, with the user and groups the API server gives that
//     account's tokens.
//   - Pods of the system namespaces (kube-system, kube-public, kube-node-lease, and the
//     router's own, where the controller runs with rights on every Sandbox) are never named by
//     their address: whoever spoofed it would hold those rights. They must send a token.
//   - Nobody is ever system:anonymous.
//
// Authorization (may this caller reach this Sandbox):
//   - The shared token reaches every Sandbox; a scoped token its one Sandbox and nothing else
//     (the router checks its UID against the Sandbox it resolves).
//   - Everyone else is asked of the API server with a SubjectAccessReview: create on
//     sandboxes/proxy (agents.x-k8s.io) of that Sandbox, or, where pods are named by their
//     address, any of the rights the caller already holds that give as much (HeldRightsReviewer:
//     patch or update on the Sandbox, create on pods/portforward of its pod), asked in order.
//   - Answers are cached per (user, groups, extra, Sandbox): allowances briefly, refusals more
//     briefly, so a new RoleBinding takes effect soon; token reviews by the token's SHA-256. A
//     good answer in use past half its TTL is asked again in the background (refreshAhead), so a
//     busy caller never waits for a review; none is used past its TTL.
//   - It fails closed: a review the API server does not answer is an error (503), never an
//     allow. Only a good answer given before (a user, an allowance) is reused while the API
//     server cannot be asked, for a bounded time; a later refusal drops it.
package access
