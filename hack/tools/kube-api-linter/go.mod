// The Kube API Linter driver (main.go) has a module of its own: KAL and its x/tools stay out of
// the project's go.mod and golangci-lint's. `make lint` builds and runs it on ./api/....
module github.com/agent-sandbox/agent-sandbox/hack/tools/kube-api-linter

go 1.26.0

require (
	golang.org/x/tools v0.52.0
	sigs.k8s.io/kube-api-linter v0.0.0-20260716143926-092fe0c72997
	sigs.k8s.io/yaml v1.4.0
)

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	k8s.io/apimachinery v0.32.3 // indirect
	k8s.io/gengo/v2 v2.0.0-20250922181213-ec3ebc5fd46b // indirect
	k8s.io/utils v0.0.0-20241104100929-3ea5e8cea738 // indirect
)
