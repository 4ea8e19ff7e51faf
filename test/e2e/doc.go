// Package e2e replays the four integrators' flows (docs/integrations.md) against the local
// cluster (internal/devcluster): real kube-apiserver, kubelet, containerd, our controller and
// router. The tests carry the build tag e2e, so plain `go test ./...` never starts a cluster;
// run them with `make test-e2e` (as root).
package e2e
