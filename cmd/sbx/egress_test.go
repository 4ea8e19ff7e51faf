package main

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

func TestCreateFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"neither", []string{"create"}, "--template is required (a claim), or --image"},
		{"both", []string{"create", "--template", "t", "--image", "i"}, "--template and --image exclude each other"},
		{"egress on a claim", []string{"create", "--template", "t", "--egress", "deny-all"}, "--egress, --egress-cidr and --egress-domain need --image"},
		{"domains on a claim", []string{"create", "--template", "t", "--egress-domain", "pypi.org"}, "need --image"},
		{"domains without restricted", []string{"create", "--image", "i", "--egress", "allow-all", "--egress-domain", "pypi.org"}, "--egress-domain needs --egress restricted"},
		{"a bare star", []string{"create", "--image", "i", "--egress", "restricted", "--egress-domain", "*"}, `egress domain "*" would allow every name`},
		{"an address as a domain", []string{"create", "--image", "i", "--egress", "restricted", "--egress-domain", "10.0.0.1"}, "is an IP address; put addresses in agents.x-k8s.io/egress-cidrs"},
		{"CIDRs on a claim", []string{"create", "--template", "t", "--egress-cidr", "10.0.0.0/8"}, "need --image"},
		{"a command on a claim", []string{"create", "--template", "t", "--", "sleep", "1"}, "a command after -- needs --image"},
		{"warm pool for an image", []string{"create", "--image", "i", "--warmpool", "none"}, "--warmpool needs --template"},
		{"unknown mode", []string{"create", "--image", "i", "--egress", "closed"}, `--egress: unknown egress mode "closed"; want allow-all, deny-all or restricted`},
		{"CIDRs without a mode", []string{"create", "--image", "i", "--egress-cidr", "10.0.0.0/8"}, "--egress-cidr needs --egress restricted"},
		{"CIDRs with deny-all", []string{"create", "--image", "i", "--egress", "deny-all", "--egress-cidr", "10.0.0.0/8"}, "egress deny-all takes no CIDRs"},
		{"a bad CIDR", []string{"create", "--image", "i", "--egress", "restricted", "--egress-cidr", "10.0.0.0/40"}, `egress CIDR "10.0.0.0/40" is not a valid CIDR`},
		{"host bits", []string{"create", "--image", "i", "--egress", "restricted", "--egress-cidr", "10.1.0.0/8"}, "has host bits set; the network is 10.0.0.0/8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := offline(tc.args...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("sbx %v: exit %d, stderr %q; want an error containing %q", tc.args, r.code, r.stderr, tc.want)
			}
		})
	}
}

func TestCreateHelpDescribesEgress(t *testing.T) {
	r := offline("create", "--help")
	for _, want := range []string{"--image", "--egress string", "allow-all, deny-all", "--egress-cidr stringArray", "sbx create --image python:3.12 --egress deny-all -- sleep infinity"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sbx create --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestCLICreateImageWithEgress(t *testing.T) {
	c := newCLI(t)
	r := c.mustRun("", "create", "--image", "runtime:test", "--name", "fp-net", "--env", "B=2", "--env", "A=1",
		"--egress", "restricted", "--egress-cidr", "203.0.113.0/24", "--egress-cidr", "198.51.100.7", "--", "sleep", "infinity")
	if strings.TrimSpace(r.stdout) != "fp-net" || !strings.Contains(r.stderr, "sandbox fp-net ready in") {
		t.Errorf("create: stdout %q stderr %q", r.stdout, r.stderr)
	}
	sb := &agentsv1alpha1.Sandbox{}
	must(t, env.Client.Get(t.Context(), keyOf(c.ns, "fp-net"), sb))
	if sb.Annotations[agentsv1alpha1.EgressAnnotation] != "restricted" || sb.Annotations[agentsv1alpha1.EgressCIDRsAnnotation] != "203.0.113.0/24,198.51.100.7/32" {
		t.Errorf("annotations = %v", sb.Annotations)
	}
	ctr := sb.Spec.PodTemplate.Spec.Containers
	if len(ctr) != 1 || ctr[0].Image != "runtime:test" || strings.Join(ctr[0].Command, " ") != "sleep infinity" ||
		len(ctr[0].Env) != 2 || ctr[0].Env[0].Name != "A" || ctr[0].Env[1].Name != "B" {
		t.Errorf("containers = %+v", ctr)
	}

	r = c.mustRun("", "create", "--image", "runtime:test", "--egress", "deny-all")
	name := strings.TrimSpace(r.stdout)
	must(t, env.Client.Get(t.Context(), keyOf(c.ns, name), sb))
	if !strings.HasPrefix(name, "sandbox-") || sb.Annotations[agentsv1alpha1.EgressAnnotation] != "deny-all" || len(sb.Spec.PodTemplate.Spec.Containers[0].Command) != 0 {
		t.Errorf("generated sandbox %q: annotations %v, command %v", name, sb.Annotations, sb.Spec.PodTemplate.Spec.Containers[0].Command)
	}
	c.mustRun("", "rm", "fp-net", name)
}

func TestCLICreateImageWithEgressDomains(t *testing.T) {
	c := newCLI(t)
	c.mustRun("", "create", "--image", "runtime:test", "--name", "fp-names", "--egress", "restricted",
		"--egress-cidr", "10.0.0.0/8", "--egress-domain", "PyPI.org", "--egress-domain", "*.pythonhosted.org", "--", "sleep", "infinity")
	sb := &agentsv1alpha1.Sandbox{}
	must(t, env.Client.Get(t.Context(), keyOf(c.ns, "fp-names"), sb))
	if sb.Annotations[agentsv1alpha1.EgressDomainsAnnotation] != "pypi.org,*.pythonhosted.org" || sb.Annotations[agentsv1alpha1.EgressCIDRsAnnotation] != "10.0.0.0/8" {
		t.Errorf("annotations = %v", sb.Annotations)
	}
	r := c.mustRun("", "get", "fp-names")
	if want := "EGRESS: restricted to 10.0.0.0/8 and pypi.org,*.pythonhosted.org [EgressPolicy EgressApplied: restricted to"; !strings.Contains(r.stdout, want) {
		t.Errorf("sbx get:\n%s\nwant a line starting %q", r.stdout, want)
	}
}

func TestDescribeEgress(t *testing.T) {
	raw := func(ann map[string]string, conds ...metav1.Condition) *agentsv1alpha1.Sandbox {
		return &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Status: agentsv1alpha1.SandboxStatus{Conditions: conds}}
	}
	unenforceable := metav1.Condition{Type: agentsv1alpha1.SandboxConditionEgressPolicy, Status: metav1.ConditionFalse,
		Reason: agentsv1alpha1.ReasonEgressDomainsUnenforceable, Message: "cannot"}
	cases := []struct {
		name     string
		obj      *agentsv1alpha1.Sandbox
		template string
		tmplAnn  map[string]string
		tmplErr  error
		want     string
	}{
		{"raw without annotations", raw(nil), "", nil, nil, "allow-all (no egress annotations)"},
		{"raw restricted with names, not enforceable", raw(map[string]string{agentsv1alpha1.EgressAnnotation: "restricted",
			agentsv1alpha1.EgressDomainsAnnotation: "pypi.org"}, unenforceable), "", nil, nil,
			"restricted to pypi.org [EgressPolicy EgressDomainsUnenforceable: cannot]"},
		{"raw with a bad list", raw(map[string]string{agentsv1alpha1.EgressAnnotation: "restricted", agentsv1alpha1.EgressDomainsAnnotation: "*"}),
			"", nil, nil, `invalid: annotation agents.x-k8s.io/egress-domains: egress domain "*" would allow every name`},
		{"claim, template with names", nil, "python", map[string]string{agentsv1alpha1.EgressDomainsAnnotation: "allowed.test *.allowed.test"}, nil,
			"template python: DNS and allowed.test,*.allowed.test"},
		{"claim, template failing open", raw(nil, unenforceable), "python", map[string]string{agentsv1alpha1.EgressDomainsAnnotation: "a.test",
			agentsv1alpha1.EgressDomainsFailOpenAnnotation: "true"}, nil, "template python: DNS and a.test (fail-open) [EgressPolicy EgressDomainsUnenforceable: cannot]"},
		{"claim, template without names", nil, "python", nil, nil, "template python's networkPolicy"},
		{"claim, template unreadable", nil, "python", nil, errors.New("forbidden"), "template python's (unreadable: forbidden)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeEgress(tc.obj, tc.template, tc.tmplAnn, tc.tmplErr); !strings.HasPrefix(got, tc.want) {
				t.Errorf("describeEgress = %q, want %q", got, tc.want)
			}
		})
	}
}
