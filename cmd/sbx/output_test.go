package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

var restConfigNowhere = rest.Config{Host: "http://127.0.0.1:1"}

// exampleSandboxes are handles on two claims (ready, pending) and two Sandboxes without a claim
// (paused by the user, paused when idle), made without a cluster.
func exampleSandboxes(t *testing.T, now time.Time) []*sdk.Sandbox {
	t.Helper()
	c, err := sdk.New(sdk.Options{RESTConfig: &restConfigNowhere, Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	ready := testwrap.MakeClaim("ns", "conv-1").Template("python").Created(now.Add(-90*time.Minute)).
		Labels(map[string]string{"team": "a", "app": "x"}).ReadyWith("python-pool-x1", "10.0.0.7").Obj()
	ready.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "sbx", Operation: metav1.ManagedFieldsOperationUpdate}}
	pending := testwrap.MakeClaim("ns", "conv-2").Template("python").Created(now.Add(-3 * time.Second)).
		Condition(metav1.Condition{Type: "Ready", Status: "False", Reason: "TemplateNotFound"}).Obj()
	raw := testwrap.MakeSandbox("ns", "ws-alice").Created(now.Add(-48 * time.Hour)).Replicas(0).Obj()
	idle := testwrap.MakeSandbox("ns", "ws-bob").Created(now.Add(-time.Hour)).Replicas(0).
		Annotation(agentsv1alpha1.IdleTimeoutAnnotation, "10m").Annotation(agentsv1alpha1.IdlePausedAnnotation, "2026-11-27T02:00:00Z").Obj()
	var sbs []*sdk.Sandbox
	for _, o := range []client.Object{ready, pending, raw, idle} {
		h, err := c.HandleFor(o)
		if err != nil {
			t.Fatal(err)
		}
		sbs = append(sbs, h)
	}
	return sbs
}

// -o prints the API objects through kubectl's printers: one object alone, a list as a v1 List,
// without managedFields unless asked.
func TestPrintObjects(t *testing.T) {
	sbs := exampleSandboxes(t, time.Now())
	tests := []struct {
		name    string
		format  string
		flags   []string
		one     bool // print sbs[0] alone, as get and create do
		check   func(t *testing.T, out string)
		wantOut string
	}{
		{name: "yaml, one claim", format: "yaml", one: true, check: func(t *testing.T, out string) {
			var cl extv1alpha1.SandboxClaim
			if err := yaml.UnmarshalStrict([]byte(out), &cl); err != nil {
				t.Fatalf("not a SandboxClaim: %v\n%s", err, out)
			}
			if cl.APIVersion != "extensions.agents.x-k8s.io/v1alpha1" || cl.Kind != "SandboxClaim" || cl.Name != "conv-1" || cl.Spec.TemplateRef.Name != "python" {
				t.Errorf("printed %s %s %s (template %s), want extensions.agents.x-k8s.io/v1alpha1 SandboxClaim conv-1 (python)", cl.APIVersion, cl.Kind, cl.Name, cl.Spec.TemplateRef.Name)
			}
			if len(cl.ManagedFields) != 0 {
				t.Errorf("managedFields printed without --show-managed-fields:\n%s", out)
			}
		}},
		{name: "yaml with managed fields", format: "yaml", flags: []string{"--show-managed-fields"}, one: true, check: func(t *testing.T, out string) {
			if !strings.Contains(out, "manager: sbx") {
				t.Errorf("--show-managed-fields: managedFields missing:\n%s", out)
			}
		}},
		{name: "json, a List", format: "json", check: func(t *testing.T, out string) {
			var list struct {
				APIVersion, Kind string
				Items            []metav1.PartialObjectMetadata
			}
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			var kinds []string
			for _, it := range list.Items {
				kinds = append(kinds, it.Kind+"/"+it.Name)
			}
			if got, want := list.APIVersion+" "+list.Kind+" "+strings.Join(kinds, ","), "v1 List SandboxClaim/conv-1,SandboxClaim/conv-2,Sandbox/ws-alice,Sandbox/ws-bob"; got != want {
				t.Errorf("printed %q, want %q", got, want)
			}
		}},
		{name: "name", format: "name", wantOut: "sandboxclaim.extensions.agents.x-k8s.io/conv-1\nsandboxclaim.extensions.agents.x-k8s.io/conv-2\nsandbox.agents.x-k8s.io/ws-alice\nsandbox.agents.x-k8s.io/ws-bob\n"},
		{name: "jsonpath", format: "jsonpath={.items[*].metadata.name}", wantOut: "conv-1 conv-2 ws-alice ws-bob"},
		{name: "go-template", format: "go-template={{.metadata.name}}/{{.spec.sandboxTemplateRef.name}}", one: true, wantOut: "conv-1/python"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := printerFor(t, append([]string{"-o", tc.format}, tc.flags...)...)
			items := sbs
			if tc.one {
				items = sbs[:1]
			}
			var b strings.Builder
			if err := printObjects(p, &b, items, !tc.one); err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, b.String())
			} else if b.String() != tc.wantOut {
				t.Errorf("-o %s printed %q, want %q", tc.format, b.String(), tc.wantOut)
			}
		})
	}
}

// The command's own formats (its table, -o wide) get no printer.
func TestOwnFormatsHaveNoPrinter(t *testing.T) {
	for _, args := range [][]string{nil, {"-o", "wide"}} {
		o := newOutputFlags("wide")
		cmd := commandWith(t, o, args...)
		p, err := o.printer()
		if err != nil || p != nil {
			t.Errorf("%s %v: printer %v, error %v; want none (the command prints the table)", cmd.Name(), args, p, err)
		}
	}
}

// printerFor is the printer an ls-like command gets for the flags.
func printerFor(t *testing.T, args ...string) printers.ResourcePrinter {
	t.Helper()
	o := newOutputFlags("wide")
	commandWith(t, o, args...)
	p, err := o.printer()
	if err != nil || p == nil {
		t.Fatalf("printer for %v: %v, %v", args, p, err)
	}
	return p
}

// commandWith is a command with o's flags, parsed from args.
func commandWith(t *testing.T, o *outputFlags, args ...string) *cobra.Command {
	t.Helper()
	cmd := &cobra.Command{Use: "ls"}
	o.addFlags(cmd, true, "a table")
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd
}
