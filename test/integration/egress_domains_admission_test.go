package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
)

// A domain allow-list (docs/egress.md, "Domains") is checked twice at admission: setting it on a
// raw Sandbox needs update on sandboxes/network like every network annotation, and its value
// must be a list of host names (agent-sandbox-egress-domains, on Sandboxes and templates).

const (
	domainsKey      = agentsv1alpha1.EgressDomainsAnnotation
	failOpenKey     = agentsv1alpha1.EgressDomainsFailOpenAnnotation
	domainsPolicy   = "agent-sandbox-egress-domains"
	domainsRefusalK = "metadata.annotations[" + domainsKey + "]: "
)

func TestEgressDomainsNeedTheNetworkRightAndHostNames(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	mustCreateObj(t, testwrap.MakeSandbox(ns, "restricted").Annotations(map[string]string{
		egressKey: agentsv1alpha1.EgressRestricted, domainsKey: "pypi.org",
	}).Obj())
	ann := func(kv string) string { return "metadata: {annotations: {" + kv + "}}" }
	restricted := egressKey + ": restricted, "
	patch := func(k, v string) string { return `{"metadata":{"annotations":{"` + k + `":` + v + `}}}` }
	notAHostIP := domainsRefusalK + `egress domain "10.0.0.1" is an IP address; put addresses in agents.x-k8s.io/egress-cidrs`
	everyName := domainsRefusalK + `egress domain "*" would allow every name; list the names, or use egress allow-all`
	runAdmissionCases(t, ns, ids, []admissionCase{
		// A tenant cannot open names for its own Sandbox, nor make it fail open.
		{name: "tenant creates with domains", as: asTenant, create: ann(restricted + domainsKey + ": pypi.org"),
			policy: networkPolicy, want: networkRefusal(egressKey, domainsKey)},
		{name: "tenant adds a domain", as: asTenant, target: "restricted", patch: patch(domainsKey, `"pypi.org,evil.example"`),
			policy: networkPolicy, want: networkRefusal(domainsKey)},
		{name: "tenant removes the domains", as: asTenant, target: "restricted", patch: patch(domainsKey, "null"),
			policy: networkPolicy, want: networkRefusal(domainsKey)},
		{name: "tenant makes it fail open", as: asTenant, target: "restricted", patch: patch(failOpenKey, `"true"`),
			policy: networkPolicy, want: networkRefusal(failOpenKey)},
		{name: "tenant sets a bad list: either refusal", as: asTenant, create: ann(restricted + domainsKey + ": '*'"),
			policy: networkPolicy, want: networkRefusal(egressKey, domainsKey), orPolicy: domainsPolicy, orWant: everyName},
		// Control: the same requests with the right.
		{name: "network admin creates with domains", as: asNetworkAdmin, create: ann(restricted + domainsKey + ": 'pypi.org *.github.com'")},
		{name: "network admin adds a domain in v1beta1", as: asNetworkAdmin, version: "v1beta1", target: "restricted",
			patch: patch(domainsKey, `"pypi.org,files.pythonhosted.org"`)},
		{name: "network admin makes it fail open", as: asNetworkAdmin, target: "restricted", patch: patch(failOpenKey, `"true"`)},
		{name: "tenant changes another annotation, the domains stay", as: asTenant, target: "restricted",
			patch: patch("team.example.com/owner", `"b"`)},
		// The right does not make a bad list good.
		{name: "network admin sets an address", as: asNetworkAdmin, create: ann(restricted + domainsKey + ": 'pypi.org, 10.0.0.1'"),
			policy: domainsPolicy, want: notAHostIP, invalid: true},
		{name: "network admin sets a bare star", as: asNetworkAdmin, target: "restricted", patch: patch(domainsKey, `"*"`),
			policy: domainsPolicy, want: everyName, invalid: true},
		{name: "network admin sets fail-open to yes", as: asNetworkAdmin, target: "restricted", patch: patch(failOpenKey, `"yes"`),
			policy: domainsPolicy, want: `metadata.annotations[` + failOpenKey + `]: "yes" is neither "true" nor "false"`, invalid: true},
		// Templates: their author's (tenants only read them); the value is judged the same way.
		{name: "admin makes a template with domains", as: asAdmin, kind: "SandboxTemplate", create: ann(domainsKey + ": 'allowed.test *.allowed.test'")},
		{name: "admin makes a template with a wildcard mid-name", as: asAdmin, kind: "SandboxTemplate", create: ann(domainsKey + ": 'api.*.example.com'"),
			policy: domainsPolicy, want: domainsRefusalK + `egress domain "api.*.example.com": a wildcard may only be the whole first label (*.example.com)`, invalid: true},
		{name: "admin makes a template with an empty list", as: asAdmin, kind: "SandboxTemplate", create: ann(domainsKey + ": ' , '"),
			policy: domainsPolicy, want: domainsRefusalK[:len(domainsRefusalK)-2] + " is empty; list host names (pypi.org,*.github.com) or remove it", invalid: true},
	})
}

// A tenant cannot widen its template's list: it may not write templates at all (RBAC), and a
// claim carries no egress (the claim controller test shows the annotation is not copied).
func TestATenantCannotEditItsTemplatesDomains(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	tmpl := testwrap.MakeTemplate(ns, "narrow").Annotation(domainsKey, "allowed.test").Obj()
	mustCreateObj(t, tmpl)
	widened := tmpl.DeepCopy()
	widened.Annotations[domainsKey] = "allowed.test,*.example.com"
	err := ids[asTenant].Update(context.Background(), widened, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot update resource \"sandboxtemplates\"") {
		t.Fatalf("a tenant widening its template's domains: got %v, want RBAC's 403", err)
	}
}

// The admission policy and the controller (pkg/egress.ParseDomain) accept and refuse the same
// entries: the rows of pkg/egress/testdata/domain_cases.json, each alone in a template's list.
func TestEgressDomainAdmissionAgreesWithTheController(t *testing.T) {
	ns := newNamespace(t)
	data, err := os.ReadFile(filepath.Join(repoRoot, "pkg/egress/testdata/domain_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ In, WantErr string }
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	many := make([]string, egress.MaxDomains+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.com", i)
	}
	cases = append(cases,
		struct{ In, WantErr string }{strings.Join(many[:egress.MaxDomains], ","), ""},
		struct{ In, WantErr string }{strings.Join(many, " "), "a list holds at most 64"})
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			_, goErr := egress.ParseDomains(egress.SplitList(tc.In))
			tmpl := testwrap.MakeTemplate(ns, fmt.Sprintf("case-%d", i)).Annotation(domainsKey, tc.In).Obj()
			apiErr := k8s.Create(context.Background(), tmpl, client.DryRunAll)
			if (goErr == nil) != (tc.WantErr == "") {
				t.Fatalf("ParseDomains(%q) = %v; the table says %q", tc.In, goErr, tc.WantErr)
			}
			switch {
			case goErr == nil && apiErr != nil:
				t.Errorf("%q: the controller accepts it, admission refuses it: %v", tc.In, apiErr)
			case goErr != nil && apiErr == nil:
				t.Errorf("%q: the controller refuses it (%v), admission accepts it", tc.In, goErr)
			case apiErr != nil && !strings.Contains(apiErr.Error(), "ValidatingAdmissionPolicy '"+domainsPolicy+"'"):
				t.Errorf("%q: refused by something else: %v", tc.In, apiErr)
			}
		})
	}
}
