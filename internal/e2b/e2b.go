// Package e2b holds what the two halves serving E2B's SDKs share: sandboxd's envd API
// (internal/sandboxd/envd) and the control plane in front of claims (e2b/controlplane).
package e2b

// EnvdVersion is the envd version whose features sandboxd serves, which the control plane
// reports as each sandbox's envdVersion: the SDK turns features on by comparing it. 0.5.7
// brings raw (octet-stream) uploads, closing stdin, stdin off by default and no default user;
// 0.6.2 would promise file metadata (extended attributes), which is not served.
const EnvdVersion = "0.5.7"
