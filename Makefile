# agent-sandbox: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

CONTROLLER_GEN := go tool -modfile=hack/tools/go.mod controller-gen
# golangci-lint has a module of its own, so that its dependencies leave the generators' alone.
GOLANGCI_LINT := go tool -modfile=hack/tools/golangci-lint/go.mod golangci-lint
# The Kube API Linter's analyzers in a driver of ours (its own module), for the API types.
KUBE_API_LINTER := bin/kube-api-linter
# The Kubernetes test binaries (kube-apiserver, etcd, kube-controller-manager) built from the Go
# module proxy into a cache outside the repo; see hack/build-k8s.sh.
K8S_BIN_DIR = $(shell hack/build-k8s.sh --print-dir)
GO_TEST_FLAGS ?= -race -count=1
PKGS ?= ./...

.PHONY: all
all: build test

.PHONY: help
help: ## Show the targets.
	@grep -E '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: generate
generate: ## Regenerate deepcopy, CRDs and RBAC from the kubebuilder markers (and their copies in the Helm chart), and the gRPC code of proto/.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd:maxDescLen=0 paths=./api/... output:crd:dir=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=agent-sandbox-controller paths=./internal/controller/... output:rbac:dir=config/rbac
	# The chart's CRDs convert through the controller's webhook (as config/crd's patch does).
	rm -f charts/agent-sandbox/crds/*.yaml
	for f in config/crd/bases/*.yaml; do \
	  STANZA="$$(cat hack/crd-conversion.yaml)" awk '{ print } /^spec:$$/ && !done { print ENVIRON["STANZA"]; done = 1 }' \
	    "$$f" > "charts/agent-sandbox/crds/$$(basename "$$f")"; done
	cp config/rbac/role.yaml charts/agent-sandbox/files/controller-role.yaml
	# The chart's admission policies are config/admission's (templates/admission.yaml renders them).
	rm -rf charts/agent-sandbox/files/admission && mkdir -p charts/agent-sandbox/files/admission
	for f in config/admission/*.yaml; do [ "$$(basename "$$f")" = kustomization.yaml ] || \
	  cp "$$f" charts/agent-sandbox/files/admission/; done
	hack/gen-proto.sh

.PHONY: verify
verify: generate ## Fail when generated files are stale or code is not gofmt'ed, vetted and linted clean.
	@if ! git diff --quiet -- api config charts pkg/proto; then \
	  echo "generated files are stale; run 'make generate' and commit:"; git --no-pager diff --stat -- api config charts pkg/proto; exit 1; fi
	@if [ -n "$$(git ls-files --others --exclude-standard -- api config charts pkg/proto)" ]; then \
	  echo "untracked generated files; run 'make generate' and commit:"; git ls-files --others --exclude-standard -- api config charts pkg/proto; exit 1; fi
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "not gofmt'ed: $$out"; exit 1; fi
	go vet ./...
	$(MAKE) lint

.PHONY: lint
lint: ## Run golangci-lint (pinned in hack/tools/golangci-lint, configured in .golangci.yml) and the Kube API Linter on api/ (hack/tools/kube-api-linter, configured in its kal.yaml).
	$(GOLANGCI_LINT) run ./...
	go build -C hack/tools/kube-api-linter -o $(CURDIR)/$(KUBE_API_LINTER) .
	$(KUBE_API_LINTER) ./api/...

.PHONY: fmt
fmt: ## Rewrite Go files to the formatters of .golangci.yml (gofmt, gci import groups).
	$(GOLANGCI_LINT) fmt ./...

.PHONY: build
build: ## Build the binaries into bin/ (sbx also as bin/kubectl-sbx, the kubectl plugin).
	go build -o bin/ ./cmd/...
	$(MAKE) kubectl-sbx

.PHONY: kubectl-sbx
kubectl-sbx: ## Build sbx as the kubectl plugin bin/kubectl-sbx (`kubectl sbx ...` with bin/ on the PATH).
	go build -o bin/kubectl-sbx ./cmd/sbx

.PHONY: k8s-binaries
k8s-binaries: ## Build the pinned Kubernetes binaries, kwok, kubectl, helm, CoreDNS, Cilium and gVisor (cached; the local cluster needs the last ones).
	hack/build-k8s.sh kube-apiserver etcd kube-controller-manager kube-scheduler kwok kubectl helm kubelet kube-proxy coredns
	hack/build-cilium.sh
	hack/build-gvisor.sh

.PHONY: images
images: ## Write the runtime, controller and router images as docker-archive tars into bin/images (no Docker needed).
	go run ./cmd/devcluster images --out bin/images

.PHONY: test
test: k8s-binaries verify ## Run every test: unit, integration on a real kube-apiserver (-race), then end to end on the local cluster.
	KUBEBUILDER_ASSETS="$(K8S_BIN_DIR)" go test $(GO_TEST_FLAGS) $(PKGS)
	$(MAKE) test-e2e

BENCH_ARGS ?= --scenario warm-burst
.PHONY: bench
bench: ## Run the claim benchmark (warm burst: 75 claims/s for 10 s on a pool of 1,000, 20 kwok nodes); BENCH_ARGS to change.
	hack/build-k8s.sh kube-apiserver etcd kube-controller-manager kube-scheduler kwok
	KUBEBUILDER_ASSETS="$(K8S_BIN_DIR)" go run ./cmd/bench-claims $(BENCH_ARGS)

.PHONY: chaos
chaos: ## Fault tolerance: 100 claims/s for 2 min while the leader is killed every 10 s and the API server and etcd restart; exits non-zero when a claim is lost or doubled or anything leaks.
	hack/build-k8s.sh kube-apiserver etcd kube-controller-manager kube-scheduler kwok
	KUBEBUILDER_ASSETS="$(K8S_BIN_DIR)" go run ./cmd/bench-claims --scenario chaos $(CHAOS_ARGS)

CHAOS_KILLS ?= 10
.PHONY: chaos-cluster
chaos-cluster: ## Faults on the installed local cluster under client load: $(CHAOS_KILLS) SIGKILLs of controller and webhook containers in turn, router replicas killed mid-call, containerd, kubelet, etcd and kube-apiserver restarted; fails on a failed call where none may fail, a lost or doubled claim. `make test` runs the same with 2 container kills.
	E2E_CONTROLLER_KILLS=$(CHAOS_KILLS) go test -tags e2e -count=1 -timeout 40m -v -run 'TestClientsLoseNoCallWhileControllersAreKilled|TestARouterKilledMidCall|TestSandboxesAndClaimsLiveThroughNodeAndControlPlaneRestarts' ./test/e2e/...

# The local cluster (etcd, kube-apiserver, kcm, scheduler, containerd, kubelet, our controller
# and router) runs as root on this machine; see docs/dev-cluster.md. DEV_ARGS e.g. --kwok-nodes 5.
# Sandboxes run under gVisor; SANDBOX_RUNTIME=runc (make dev/demo/test-e2e SANDBOX_RUNTIME=runc)
# gives them plain runc.
DEV_ARGS ?=
.PHONY: dev
dev: ## Start (or reuse) the local single-node cluster with agent-sandbox installed.
	go run ./cmd/devcluster up $(DEV_ARGS)

.PHONY: dev-down
dev-down: ## Stop every process of the local cluster and undo its host changes.
	go run ./cmd/devcluster down

.PHONY: demo
demo: ## Bring the local cluster up and run the demo: warm and cold claims, exec, files, pause/resume.
	go run ./cmd/demo

RUNTIME_ROUNDS ?= 5
.PHONY: bench-runtimes
bench-runtimes: ## gVisor against runc on the local cluster: each step of a sandbox's life, median of $(RUNTIME_ROUNDS) alternated rounds (docs/bench-runtimes.md).
	go run ./cmd/demo --compare-rounds $(RUNTIME_ROUNDS)

.PHONY: test-e2e
test-e2e: ## Run the integrators' flows (docs/integrations.md) and the security and fault tests end to end on the local cluster (reused if running, else started and stopped again).
	go test -tags e2e -count=1 -timeout 40m -v ./test/e2e/...

.PHONY: clean
clean: ## Remove build output (the Kubernetes binary cache is kept; see hack/build-k8s.sh).
	rm -rf bin/
