//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// On a real cluster, no tenant-written metadata puts the router's label on a running sandbox
// pod: claims are refused at admission, templates and raw Sandboxes have it left out.
func TestNoSandboxPodPosesAsTheRouter(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "security")
	ctx := t.Context()

	claim := testwrap.MakeClaim(ns, "impostor").Template("router-labelled")
	if err := kube.Create(ctx, claim.Clone().PodLabel("app", "sandbox-router").Obj()); err == nil || !strings.Contains(err.Error(), "identify the sandbox router") {
		t.Fatalf("a claim asking for the router's label: err = %v, want an admission error", err)
	}

	// The template carries the router's label from its creation (an update racing the claim
	// could let the claim see the older template).
	tmpl := testwrap.MakeTemplate(ns, "router-labelled").Containers(runtimeContainer()).TerminationGracePeriod(5).
		PodLabel("app", "sandbox-router").PodLabel("team", "a").Obj()
	mustf(t, kube.Create(ctx, tmpl), "creating template")
	mustf(t, kube.Create(ctx, claim.Obj()), "creating claim")
	raw := harnessSandbox(ns, "raw-impostor", nil).PodLabel("app", "sandbox-router").Obj()
	mustf(t, kube.Create(ctx, raw), "creating raw sandbox")

	for _, name := range []string{"impostor", "raw-impostor"} {
		pod := waitPodReady(t, ns, name)
		if pod.Labels["app"] == "sandbox-router" {
			t.Errorf("running pod %s carries app=sandbox-router: %v", name, pod.Labels)
		}
	}
	if pod, err := podOf(context.Background(), ns, "impostor"); err != nil || pod.Labels["team"] != "a" {
		t.Errorf("the template's open label team=a is missing: %v %v", err, pod.Labels)
	}
}
