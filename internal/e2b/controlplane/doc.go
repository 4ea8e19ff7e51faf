// Package controlplane serves E2B's REST API (the calls of E2B's SDKs to E2B_API_URL) in front
// of SandboxClaims, on the router's E2B port.
//
// Rules:
//   - An API key (X-API-KEY: e2b_<token>, or a bare token) is a Kubernetes ServiceAccount token.
//     It is checked with a SelfSubjectReview made with the token itself, which needs no rights;
//     the user must be system:serviceaccount:<ns>:<name>, and <ns> is the key's namespace.
//     Answers are cached by the token's SHA-256: allowances for a minute, refusals for seconds.
//   - Every Kubernetes call for a request is made with the caller's own token, so RBAC decides
//     what a key may do (the ClusterRole agent-sandbox-e2b-key lists what the API needs); this
//     package holds no rights of its own over tenants' objects. A Forbidden answer is a 403 with
//     the API server's message.
//   - Every sandbox is a SandboxClaim (v1alpha1, so that a template and any of its warm pools can
//     be named) labelled e2b.agents.x-k8s.io/sandbox=true, in the key's namespace: templateID is
//     the SandboxTemplate, envVars the claim's env (the warm-env path), timeout its shutdownTime
//     (policy Delete), metadata a JSON annotation. sandboxID is the name of the Sandbox serving
//     the claim, which the router routes by; a sandbox is looked for in the key's namespace only,
//     so another namespace's answers 404 like one that does not exist.
//   - envdAccessToken is a router token scoped to that Sandbox (namespace, name, UID) until the
//     claim's shutdown time, at most a day: the router's E2B port takes it as X-Access-Token.
//   - Pause is our pause (replicas 0: the pod goes, volumes stay), keeping memory as E2B's does
//     unless memory is false (pause-mode KeepMemory); connect resumes (replicas 1) and waits
//     until the sandbox is ready, by a Ready written since the resume. Fork makes claims whose
//     Sandboxes the controller restores from a save of the parent (docs/snapshots.md). What
//     E2B has and we do not (template builds, snapshots, metrics, logs, network and volume
//     updates) answers 501 naming the alternative; errors are E2B's {"code", "message"}.
package controlplane
