package integration

import (
	"path/filepath"
	"reflect"
	"testing"
)

// The chart and kustomize ship the same client roles, so a platform gets the same rights
// whichever install it uses (the router checks create on sandboxes/proxy).
func TestClientRolesAreTheSameInTheChartAndKustomize(t *testing.T) {
	want := map[string]any{}
	for _, o := range decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "config/rbac/client_roles.yaml"))) {
		want[o.GetName()] = o.Object["rules"]
	}
	if len(want) != 4 {
		t.Fatalf("config/rbac/client_roles.yaml has %d roles, want agent-sandbox-user, agent-sandbox-viewer, agent-sandbox-network-admin and agent-sandbox-e2b-key", len(want))
	}
	objs, err := helmTemplate(t, "agent-sandbox-system")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, o := range objs {
		rules, ok := want[o.GetName()]
		if o.GetKind() != "ClusterRole" || !ok {
			continue
		}
		found++
		if !reflect.DeepEqual(o.Object["rules"], rules) {
			t.Errorf("chart %s rules %v\nwant kustomize's %v", o.GetName(), o.Object["rules"], rules)
		}
	}
	if found != len(want) {
		t.Fatalf("chart renders %d of the %d client roles", found, len(want))
	}
	noRoles, err := helmTemplate(t, "agent-sandbox-system", "clientRoles.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range noRoles {
		if _, ok := want[o.GetName()]; ok && o.GetKind() == "ClusterRole" {
			t.Fatalf("clientRoles.enabled=false still renders %s", o.GetName())
		}
	}
}
