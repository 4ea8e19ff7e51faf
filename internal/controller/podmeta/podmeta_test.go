package podmeta

import (
	"reflect"
	"strings"
	"testing"
)

func TestReserved(t *testing.T) {
	cases := []struct {
		key  string
		want bool
	}{
		{"kubernetes.io/hostname", true},
		{"node.kubernetes.io/instance-type", true},
		{"k8s.io/anything", true},
		{"sub.k8s.io/x", true},
		{"agents.x-k8s.io/sandbox-name-hash", true},
		{"extensions.agents.x-k8s.io/anything", true},
		{"app.kubernetes.io/name", false},    // the recommended labels are for users
		{"kueue.x-k8s.io/queue-name", false}, // another project's domain under x-k8s.io
		{"x-k8s.io/foo", false},
		{"mykubernetes.io/foo", false}, // not a subdomain, only a longer name
		{"cognition.io/tenant", false},
		{"app", false},
		{"kubernetes.io", false}, // no prefix: "kubernetes.io" is the name
	}
	for _, c := range cases {
		if got := Reserved(c.key); got != c.want {
			t.Errorf("Reserved(%q) = %v, want %v", c.key, got, c.want)
		}
	}
}

func TestLabelProblem(t *testing.T) {
	custom := Rules{RouterLabels: map[string]string{"role": "gateway", "tier": "edge"}}
	cases := []struct {
		name    string
		rules   Rules
		k, v    string
		wantSub string // "" means allowed
	}{
		{"the default router label", Rules{}, "app", "sandbox-router", "identifies the sandbox router"},
		{"the recommended-label form of the router", Rules{}, "app.kubernetes.io/name", "sandbox-router", "identifies the sandbox router"},
		{"another app value is fine", Rules{}, "app", "my-agent", ""},
		{"a configured router label", custom, "tier", "edge", "identifies the sandbox router"},
		{"a configured router key with another value", custom, "tier", "backend", ""},
		{"a reserved domain", Rules{}, "agents.x-k8s.io/sandbox-template-ref-hash", "abc", "reserved domain"},
		{"a Kubernetes domain", Rules{}, "node-role.kubernetes.io/control-plane", "", "reserved domain"},
		{"a user's domain", Rules{}, "cognition.io/session", "s1", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.rules.LabelProblem(c.k, c.v)
			if c.wantSub == "" && got != "" {
				t.Fatalf("LabelProblem(%s=%s) = %q, want allowed", c.k, c.v, got)
			}
			if c.wantSub != "" && !strings.Contains(got, c.wantSub) {
				t.Fatalf("LabelProblem(%s=%s) = %q, want a message containing %q", c.k, c.v, got, c.wantSub)
			}
			if c.wantSub != "" && !strings.Contains(got, c.k) {
				t.Fatalf("LabelProblem(%s=%s) = %q does not name the key", c.k, c.v, got)
			}
		})
	}
}

func TestAnnotationProblem(t *testing.T) {
	cases := []struct {
		key     string
		allowed bool
	}{
		{"cluster-autoscaler.kubernetes.io/safe-to-evict", true},
		{"kubernetes.io/egress-bandwidth", false},
		{"agents.x-k8s.io/propagated-labels", false},
		{"example.com/owner", true},
		{"note", true},
	}
	for _, c := range cases {
		got := AnnotationProblem(c.key)
		if (got == "") != c.allowed {
			t.Errorf("AnnotationProblem(%q) = %q, want allowed=%v", c.key, got, c.allowed)
		}
	}
}

func TestFilterKeepsAllowedKeysAndNamesTheRefusedOnes(t *testing.T) {
	labels := map[string]string{"app": "sandbox-router", "team": "a", "agents.x-k8s.io/claim-uid": "x"}
	annotations := map[string]string{"kubernetes.io/psp": "x", "owner": "me"}
	kl, ka, problems := Rules{}.Filter(labels, annotations)
	if want := map[string]string{"team": "a"}; !reflect.DeepEqual(kl, want) {
		t.Errorf("kept labels = %v, want %v", kl, want)
	}
	if want := map[string]string{"owner": "me"}; !reflect.DeepEqual(ka, want) {
		t.Errorf("kept annotations = %v, want %v", ka, want)
	}
	if len(problems) != 3 {
		t.Fatalf("problems = %q, want 3 (one per refused key)", problems)
	}
	if len(labels) != 3 || len(annotations) != 2 {
		t.Errorf("Filter changed its input: %v %v", labels, annotations)
	}
}

func TestFilterWithNothingRefusedReturnsTheInput(t *testing.T) {
	labels := map[string]string{"team": "a"}
	kl, _, problems := Rules{}.Filter(labels, nil)
	if problems != nil || !reflect.DeepEqual(kl, labels) {
		t.Fatalf("Filter = %v, %q; want the input and no problems", kl, problems)
	}
}

func TestWithoutRouterLabels(t *testing.T) {
	in := map[string]string{"app": "sandbox-router", "agents.x-k8s.io/sandbox-template-ref-hash": "h", "team": "a"}
	out, dropped := Rules{}.WithoutRouterLabels(in)
	want := map[string]string{"agents.x-k8s.io/sandbox-template-ref-hash": "h", "team": "a"}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("labels = %v, want %v (only router pairs dropped; our own keys stay)", out, want)
	}
	if !reflect.DeepEqual(dropped, []string{"app=sandbox-router"}) {
		t.Errorf("dropped = %q, want [app=sandbox-router]", dropped)
	}
	if same, none := (Rules{}).WithoutRouterLabels(want); none != nil || !reflect.DeepEqual(same, want) {
		t.Errorf("clean labels changed: %v %q", same, none)
	}
}
