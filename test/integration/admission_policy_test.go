package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The ValidatingAdmissionPolicies of config/admission (docs/security.md, "Admission rules"),
// which testenv installs as the install does, on the real API server. Each case sends one
// request, as a dry run, as one identity: a tenant (a service account bound to
// agent-sandbox-user in its namespace), an identity holding the right the rule asks for, or a
// cluster admin; and checks that it is allowed, or refused with exactly the policy's message.

// The identities of the cases.
const (
	asTenant       = "tenant"
	asNetworkAdmin = "network-admin" // agent-sandbox-user and agent-sandbox-network-admin
	asOneSandbox   = "one-sandbox"   // agent-sandbox-user and sandboxes/network of "named" only
	asController   = "controller"    // the controller's generated ClusterRole
	asAdmin        = "cluster-admin" // system:masters
	namedSandbox   = "named"         // the one Sandbox asOneSandbox may change the network of
)

// The policies.
const (
	networkPolicy    = "agent-sandbox-network"
	ownershipPolicy  = "agent-sandbox-ownership"
	hostAccessPolicy = "agent-sandbox-host-access"
)

type admissionCase struct {
	name    string
	as      string
	version string // v1alpha1 (default) or v1beta1
	kind    string // Sandbox (default) or SandboxTemplate
	// create is a YAML fragment merged into a valid object of kind and version, which is created
	// with the name createName (default "case-<n>").
	create, createName string
	// patch is a JSON merge patch sent to the existing object named target.
	patch, target string
	// policy and want: the policy that refuses the request and its message, in which $SANDBOX
	// stands for namespace/name; both empty when the request is allowed.
	policy, want string
	// orPolicy and orWant: a second policy that refuses the same request. The API server
	// reports the first refusal, and the order of policies is not fixed.
	orPolicy, orWant string
	// invalid: the policy refuses a bad value (422 Invalid) rather than a missing right (403).
	invalid bool
}

// actAs returns a client that acts as service account sa of ns, as its token would.
func actAs(t *testing.T, ns, sa string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bindRoles binds service account sa of ns to the roles ("ClusterRole/x" or "Role/x") in ns.
func bindRoles(t *testing.T, ns, sa string, roles ...string) {
	t.Helper()
	for _, r := range roles {
		kind, name, _ := strings.Cut(r, "/")
		mustCreateObj(t, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + "-" + strings.ToLower(kind) + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		})
	}
}

// shippedControllerRole creates the controller's ClusterRole generated from the RBAC markers
// (config/rbac/role.yaml) for the test's duration.
func shippedControllerRole(t *testing.T) {
	t.Helper()
	for _, o := range decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "config/rbac/role.yaml"))) {
		if o.GetKind() != "ClusterRole" || o.GetName() != "agent-sandbox-controller" {
			continue
		}
		if err := k8s.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
		return
	}
	t.Fatal("no ClusterRole agent-sandbox-controller in config/rbac/role.yaml")
}

// identitiesIn binds the cases' service accounts in ns, waits until RBAC grants each what it
// is bound to, and returns a client per identity.
func identitiesIn(t *testing.T, ns string) map[string]client.Client {
	t.Helper()
	shippedClientRole(t, "agent-sandbox-user")
	shippedClientRole(t, "agent-sandbox-network-admin")
	shippedControllerRole(t)
	mustCreateObj(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "network-of-named"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes/network"}, Verbs: []string{"update"},
		ResourceNames: []string{namedSandbox},
	}}})
	bindRoles(t, ns, asTenant, "ClusterRole/agent-sandbox-user")
	bindRoles(t, ns, asNetworkAdmin, "ClusterRole/agent-sandbox-user", "ClusterRole/agent-sandbox-network-admin")
	bindRoles(t, ns, asOneSandbox, "ClusterRole/agent-sandbox-user", "Role/network-of-named")
	bindRoles(t, ns, asController, "ClusterRole/agent-sandbox-controller")
	for sa, sub := range map[string]string{asTenant: "", asNetworkAdmin: "network", asOneSandbox: "network", asController: "ownership"} {
		verb := "update"
		if sub == "" {
			verb = "create"
		}
		waitForRight(t, ns, sa, verb, sub, namedSandbox)
	}
	ids := map[string]client.Client{asAdmin: k8s}
	for _, sa := range []string{asTenant, asNetworkAdmin, asOneSandbox, asController} {
		ids[sa] = actAs(t, ns, sa)
	}
	return ids
}

// waitForRight waits until the authorizer allows sa verb on sandboxes[/sub] named name in ns
// (RBAC sees new bindings through its informers, a moment later).
func waitForRight(t *testing.T, ns, sa, verb, sub, name string) {
	t.Helper()
	testwrap.Eventually(t, fmt.Sprintf("%s may %s sandboxes/%s", sa, verb, sub), func() error {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + ns + ":" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "agents.x-k8s.io",
				Resource: "sandboxes", Subresource: sub, Name: name},
		}}
		if err := k8s.Create(context.Background(), sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not allowed yet (%s)", sar.Status.Reason)
		}
		return nil
	})
}

// caseObject is a valid object of kind and version with the fragment merged in.
func caseObject(t *testing.T, kind, version, fragment string) *unstructured.Unstructured {
	t.Helper()
	group := "agents.x-k8s.io"
	if kind == "SandboxTemplate" {
		group = "extensions.agents.x-k8s.io"
	}
	obj := map[string]any{
		"apiVersion": group + "/" + version, "kind": kind,
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "runtime", "image": "runtime:1"}},
		}}},
	}
	var extra map[string]any
	if err := yaml.Unmarshal([]byte(fragment), &extra); err != nil {
		t.Fatalf("bad case fragment %q: %v", fragment, err)
	}
	mergeInto(obj, extra)
	return &unstructured.Unstructured{Object: obj}
}

// mergeInto merges src into dst: maps key by key, everything else replaced.
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		sm, ok1 := v.(map[string]any)
		dm, ok2 := dst[k].(map[string]any)
		if ok1 && ok2 {
			mergeInto(dm, sm)
			continue
		}
		dst[k] = v
	}
}

// runAdmissionCases sends every case (as a dry run) in ns and checks the answer.
func runAdmissionCases(t *testing.T, ns string, ids map[string]client.Client, cases []admissionCase) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind, version := c.kind, c.version
			if kind == "" {
				kind = "Sandbox"
			}
			if version == "" {
				version = "v1alpha1"
			}
			cl, ok := ids[c.as]
			if !ok {
				t.Fatalf("unknown identity %q", c.as)
			}
			var obj *unstructured.Unstructured
			var err error
			if c.patch == "" {
				obj = caseObject(t, kind, version, c.create)
				obj.SetNamespace(ns)
				obj.SetName(c.createName)
				if c.createName == "" {
					obj.SetName(fmt.Sprintf("case-%d", i))
				}
				err = cl.Create(context.Background(), obj, client.DryRunAll)
			} else {
				obj = caseObject(t, kind, version, "")
				obj.SetNamespace(ns)
				obj.SetName(c.target)
				err = cl.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(c.patch)), client.DryRunAll)
			}
			checkAdmission(t, c, obj, err)
		})
	}
}

// checkAdmission fails the test unless err is the case's answer: nil, or the policy's refusal
// with exactly its message.
func checkAdmission(t *testing.T, c admissionCase, obj *unstructured.Unstructured, err error) {
	t.Helper()
	if c.want == "" {
		if err != nil {
			t.Fatalf("%s: want it allowed, got %v", c.as, err)
		}
		return
	}
	resource := "sandboxes.agents.x-k8s.io"
	if obj.GetKind() == "SandboxTemplate" {
		resource = "sandboxtemplates.extensions.agents.x-k8s.io"
	}
	refusal := func(policy, msg string) string {
		return fmt.Sprintf("%s %q is forbidden: ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", resource,
			obj.GetName(), policy, policy, strings.ReplaceAll(msg, "$SANDBOX", obj.GetNamespace()+"/"+obj.GetName()))
	}
	want := refusal(c.policy, c.want)
	code, reason := int32(403), metav1.StatusReasonForbidden
	if c.invalid {
		code, reason = 422, metav1.StatusReasonInvalid
	}
	var se apierrors.APIStatus
	if err == nil || !errors.As(err, &se) {
		t.Fatalf("%s: got %v, want %d %s %q", c.as, err, code, reason, want)
	}
	st := se.Status()
	if c.orPolicy != "" && st.Message == refusal(c.orPolicy, c.orWant) {
		return
	}
	if st.Code != code || st.Reason != reason || st.Message != want {
		t.Fatalf("%s: got %d %s %q\nwant %d %s %q", c.as, st.Code, st.Reason, st.Message, code, reason, want)
	}
}

// networkRefusal is the network policy's message for the keys changed.
func networkRefusal(keys ...string) string {
	return "metadata.annotations[" + strings.Join(keys, ", ") + "]: setting, changing or removing a Sandbox's network " +
		"annotations needs update on sandboxes/network (agents.x-k8s.io) for Sandbox $SANDBOX, which the ClusterRole " +
		"agent-sandbox-network-admin grants"
}

// A tenant cannot widen a Sandbox's network through its annotations; whoever holds update on
// sandboxes/network (for that Sandbox) can, and a cluster admin can.
func TestNetworkAnnotationsNeedTheNetworkRight(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	// A Sandbox whose egress a network admin set.
	mustCreateObj(t, testwrap.MakeSandbox(ns, "restricted").Annotations(map[string]string{
		agentsv1alpha1.EgressAnnotation: agentsv1alpha1.EgressRestricted, agentsv1alpha1.EgressCIDRsAnnotation: "10.0.0.0/8",
	}).Obj())
	const (
		egress  = agentsv1alpha1.EgressAnnotation
		cidrs   = agentsv1alpha1.EgressCIDRsAnnotation
		ingress = agentsv1alpha1.IngressFromPodsAnnotation
		npm     = agentsv1alpha1.NetworkPolicyManagementAnnotation
	)
	ann := func(kv string) string { return "metadata: {annotations: {" + kv + "}}" }
	runAdmissionCases(t, ns, ids, []admissionCase{
		{name: "tenant creates with egress", as: asTenant, create: ann(egress + ": allow-all"), policy: networkPolicy, want: networkRefusal(egress)},
		{name: "tenant creates with egress-cidrs", as: asTenant, create: ann(cidrs + ": 0.0.0.0/0"), policy: networkPolicy, want: networkRefusal(cidrs)},
		{name: "tenant creates with ingress-from-pods", as: asTenant, create: ann(ingress + ": app=any"), policy: networkPolicy, want: networkRefusal(ingress)},
		{name: "tenant creates with network-policy-management", as: asTenant, create: ann(npm + ": Unmanaged"), policy: networkPolicy, want: networkRefusal(npm)},
		{name: "tenant creates with two of them, both named", as: asTenant, create: ann(egress + ": restricted, " + cidrs + ": 10.0.0.0/8"),
			policy: networkPolicy, want: networkRefusal(egress, cidrs)},
		{name: "tenant creates with an empty egress", as: asTenant, create: ann(egress + ": ''"), policy: networkPolicy, want: networkRefusal(egress)},
		{name: "tenant creates with other annotations", as: asTenant, create: ann("team.example.com/owner: a, agents.x-k8s.io/other: b")},
		{name: "tenant creates with egress in v1beta1", as: asTenant, version: "v1beta1", create: ann(egress + ": allow-all"), policy: networkPolicy, want: networkRefusal(egress)},
		{name: "network admin creates with egress", as: asNetworkAdmin, create: ann(egress + ": allow-all")},
		{name: "network admin creates with network-policy-management in v1beta1", as: asNetworkAdmin, version: "v1beta1", create: ann(npm + ": Unmanaged")},
		{name: "cluster admin creates with ingress-from-pods", as: asAdmin, create: ann(ingress + ": app=any")},
		{name: "controller creates with network-policy-management (an Unmanaged template's)", as: asController, create: ann(npm + ": Unmanaged")},
		{name: "the right for one Sandbox, that Sandbox", as: asOneSandbox, createName: namedSandbox, create: ann(egress + ": allow-all")},
		{name: "the right for one Sandbox, another Sandbox", as: asOneSandbox, createName: "other", create: ann(egress + ": allow-all"),
			policy: networkPolicy, want: networkRefusal(egress)},
		{name: "tenant widens egress", as: asTenant, target: "restricted", patch: `{"metadata":{"annotations":{"` + egress + `":"allow-all"}}}`,
			policy: networkPolicy, want: networkRefusal(egress)},
		{name: "tenant changes the CIDRs", as: asTenant, target: "restricted", patch: `{"metadata":{"annotations":{"` + cidrs + `":"0.0.0.0/0"}}}`,
			policy: networkPolicy, want: networkRefusal(cidrs)},
		{name: "tenant removes egress", as: asTenant, target: "restricted", patch: `{"metadata":{"annotations":{"` + egress + `":null}}}`,
			policy: networkPolicy, want: networkRefusal(egress)},
		{name: "tenant adds ingress-from-pods", as: asTenant, target: "restricted", patch: `{"metadata":{"annotations":{"` + ingress + `":"app=x"}}}`,
			policy: networkPolicy, want: networkRefusal(ingress)},
		{name: "tenant opts out of the policy in v1beta1", as: asTenant, version: "v1beta1", target: "restricted",
			patch: `{"metadata":{"annotations":{"` + npm + `":"Unmanaged"}}}`, policy: networkPolicy, want: networkRefusal(npm)},
		{name: "tenant changes another annotation, the network ones stay", as: asTenant, target: "restricted",
			patch: `{"metadata":{"annotations":{"team.example.com/owner":"b"}}}`},
		{name: "tenant changes the spec in v1beta1, the network ones stay", as: asTenant, version: "v1beta1", target: "restricted",
			patch: `{"spec":{"operatingMode":"Suspended"}}`},
		{name: "network admin widens egress", as: asNetworkAdmin, target: "restricted", patch: `{"metadata":{"annotations":{"` + egress + `":"allow-all"}}}`},
		{name: "network admin removes the CIDRs in v1beta1", as: asNetworkAdmin, version: "v1beta1", target: "restricted",
			patch: `{"metadata":{"annotations":{"` + cidrs + `":null}}}`},
	})
}

// ownershipRefusal* are the ownership policy's messages.
func ownerRefusal(owners ...string) string {
	return "metadata.ownerReferences[" + strings.Join(owners, ", ") + "]: only the agent-sandbox controller makes a Sandbox " +
		"belong to a SandboxClaim or SandboxWarmPool; adding, changing or removing such an owner needs update on sandboxes/ownership (agents.x-k8s.io)"
}

func controllerLabelRefusal(keys ...string) string {
	return "metadata.labels[" + strings.Join(keys, ", ") + "]: the agent-sandbox controller's labels are set only by it; " +
		"setting, changing or removing them needs update on sandboxes/ownership (agents.x-k8s.io)"
}

func podLabelRefusal(keys ...string) string {
	return "spec.podTemplate.metadata.labels[" + strings.Join(keys, ", ") + "]: keys of the agents.x-k8s.io domain and the " +
		"sandbox router's labels (app or app.kubernetes.io/name sandbox-router) are set only by the agent-sandbox controller; " +
		"setting, changing or removing them needs update on sandboxes/ownership (agents.x-k8s.io)"
}

const sessionEnvRefusal = "metadata.annotations[agents.x-k8s.io/session-env]: a warm claim's env is set only by the " +
	"agent-sandbox controller (update on sandboxes/ownership, agents.x-k8s.io); put env on the SandboxClaim, under its " +
	"template's envVarsInjectionPolicy"

// A tenant cannot make its Sandbox pass for a claim's or a pool's (and so be adopted, counted or
// selected as one), nor put the controller's or the router's labels on it; the controller can.
// A tenant still updates its claim's Sandbox as long as those stay as they are.
func TestSandboxOwnershipNeedsTheOwnershipRight(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	// A claim-made Sandbox: the tenant claims from a template, the controller creates it.
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj())
	if err := ids[asTenant].Create(context.Background(), testwrap.MakeClaim(ns, "mine").Template("tmpl").WarmPool("none").Obj()); err != nil {
		t.Fatalf("the tenant creating a claim: %v", err)
	}
	claimed := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}
	testwrap.Eventually(t, "the claim's Sandbox exists", exists(claimed, true))
	claim := getClaim(t, ns, "mine")
	pool := create(t, testwrap.MakeWarmPool(ns, "pool").Template("tmpl").Replicas(0).Obj())
	if got := claimed.Labels[extv1alpha1.ClaimUIDLabel]; got != string(claim.UID) {
		t.Fatalf("the claim's Sandbox has claim-uid %q, want %q", got, claim.UID)
	}

	ref := func(apiVersion, kind, name string, uid types.UID) string {
		return fmt.Sprintf("metadata: {ownerReferences: [{apiVersion: %s, kind: %s, name: %s, uid: %s, controller: true}]}", apiVersion, kind, name, uid)
	}
	label := func(k, v string) string { return fmt.Sprintf("metadata: {labels: {%s: %q}}", k, v) }
	podLabel := func(k, v string) string {
		return fmt.Sprintf("spec: {podTemplate: {metadata: {labels: {%s: %q}}}}", k, v)
	}
	cases := []admissionCase{
		{name: "tenant creates one owned by a pool", as: asTenant, create: ref("extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool", "pool", pool.UID),
			policy: ownershipPolicy, want: ownerRefusal("SandboxWarmPool/pool")},
		{name: "tenant creates one owned by a claim in v1beta1", as: asTenant, version: "v1beta1",
			create: ref("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", "mine", claim.UID), policy: ownershipPolicy, want: ownerRefusal("SandboxClaim/mine")},
		{name: "tenant creates one owned by a claim of another group", as: asTenant, create: ref("evil.example.com/v1", "SandboxClaim", "mine", claim.UID),
			policy: ownershipPolicy, want: ownerRefusal("SandboxClaim/mine")},
		{name: "tenant creates one owned by a ConfigMap", as: asTenant, create: ref("v1", "ConfigMap", "cm", "0e0e0e0e-0000-0000-0000-000000000000")},
		{name: "controller creates one owned by a pool", as: asController, create: ref("extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool", "pool", pool.UID)},
		{name: "cluster admin creates one owned by a claim", as: asAdmin, create: ref("extensions.agents.x-k8s.io/v1alpha1", "SandboxClaim", "mine", claim.UID)},
	}
	for _, k := range []string{extv1alpha1.WarmPoolLabel, extv1alpha1.ClaimUIDLabel, extv1alpha1.TemplateRefHashLabel, extv1alpha1.TemplateHashLabel, extv1alpha1.LaunchTypeLabel} {
		cases = append(cases,
			admissionCase{name: "tenant creates with label " + k, as: asTenant, create: label(k, "x"), policy: ownershipPolicy, want: controllerLabelRefusal(k)},
			admissionCase{name: "controller creates with label " + k, as: asController, create: label(k, "x")})
	}
	for _, kv := range [][2]string{{extv1alpha1.TemplateRefHashLabel, "abc"}, {"agents.x-k8s.io/anything", "x"}, {"extensions.agents.x-k8s.io/x", "y"},
		{"app", "sandbox-router"}, {"app.kubernetes.io/name", "sandbox-router"}} {
		cases = append(cases,
			admissionCase{name: "tenant creates with pod label " + kv[0] + "=" + kv[1], as: asTenant, create: podLabel(kv[0], kv[1]),
				policy: ownershipPolicy, want: podLabelRefusal(kv[0])},
			admissionCase{name: "controller creates with pod label " + kv[0] + "=" + kv[1], as: asController, create: podLabel(kv[0], kv[1])})
	}
	cases = append(cases,
		admissionCase{name: "tenant creates with pod labels of other domains and values", as: asTenant,
			create: `spec: {podTemplate: {metadata: {labels: {app: web, app.kubernetes.io/name: web, team.example.com/x: "y", notagents.x-k8s.io/x: "y"}}}}`},
		admissionCase{name: "tenant creates with router pod labels in v1beta1", as: asTenant, version: "v1beta1", create: podLabel("app", "sandbox-router"),
			policy: ownershipPolicy, want: podLabelRefusal("app")},
		// The claim's Sandbox, changed by its tenant.
		admissionCase{name: "tenant sets the shutdown time of its claim's Sandbox", as: asTenant, target: "mine",
			patch: `{"spec":{"shutdownTime":"2030-01-01T00:00:00Z"}}`},
		admissionCase{name: "tenant pauses its claim's Sandbox", as: asTenant, target: "mine", patch: `{"spec":{"replicas":0}}`},
		admissionCase{name: "tenant annotates its claim's Sandbox in v1beta1", as: asTenant, version: "v1beta1", target: "mine",
			patch: `{"metadata":{"annotations":{"team.example.com/note":"x"}},"spec":{"shutdownTime":"2030-01-01T00:00:00Z"}}`},
		admissionCase{name: "tenant hands its claim's Sandbox to the pool", as: asTenant, target: "mine",
			patch:  fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"extensions.agents.x-k8s.io/v1alpha1","kind":"SandboxWarmPool","name":"pool","uid":%q,"controller":true}]}}`, pool.UID),
			policy: ownershipPolicy, want: ownerRefusal("SandboxWarmPool/pool", "SandboxClaim/mine")},
		admissionCase{name: "tenant changes the claim's owner reference", as: asTenant, target: "mine",
			patch:  `{"metadata":{"ownerReferences":[{"apiVersion":"extensions.agents.x-k8s.io/v1alpha1","kind":"SandboxClaim","name":"mine","uid":"0e0e0e0e-0000-0000-0000-000000000000","controller":true}]}}`,
			policy: ownershipPolicy, want: ownerRefusal("SandboxClaim/mine")},
		admissionCase{name: "tenant frees its claim's Sandbox from the claim", as: asTenant, target: "mine",
			patch: `{"metadata":{"ownerReferences":null}}`, policy: ownershipPolicy, want: ownerRefusal("SandboxClaim/mine")},
		admissionCase{name: "tenant removes the claim-uid label", as: asTenant, target: "mine",
			patch: `{"metadata":{"labels":{"` + extv1alpha1.ClaimUIDLabel + `":null}}}`, policy: ownershipPolicy, want: controllerLabelRefusal(extv1alpha1.ClaimUIDLabel)},
		admissionCase{name: "tenant takes its claim's pod out of the template's policy", as: asTenant, target: "mine",
			patch:  `{"spec":{"podTemplate":{"metadata":{"labels":{"` + extv1alpha1.TemplateRefHashLabel + `":null}}}}}`,
			policy: ownershipPolicy, want: podLabelRefusal(extv1alpha1.TemplateRefHashLabel),
			orPolicy: frozenPolicy, orWant: frozenClaimRefusal("mine", "SandboxClaim/mine")},
		admissionCase{name: "tenant changes the claim-uid label", as: asTenant, target: "mine",
			patch: `{"metadata":{"labels":{"` + extv1alpha1.ClaimUIDLabel + `":"other"}}}`, policy: ownershipPolicy, want: controllerLabelRefusal(extv1alpha1.ClaimUIDLabel)},
		admissionCase{name: "tenant marks its claim's Sandbox a pool member in v1beta1", as: asTenant, version: "v1beta1", target: "mine",
			patch: `{"metadata":{"labels":{"` + extv1alpha1.WarmPoolLabel + `":"x"}}}`, policy: ownershipPolicy, want: controllerLabelRefusal(extv1alpha1.WarmPoolLabel)},
		admissionCase{name: "tenant changes the template pod label", as: asTenant, target: "mine",
			patch:  `{"spec":{"podTemplate":{"metadata":{"labels":{"` + extv1alpha1.TemplateRefHashLabel + `":"other"}}}}}`,
			policy: ownershipPolicy, want: podLabelRefusal(extv1alpha1.TemplateRefHashLabel),
			orPolicy: frozenPolicy, orWant: frozenClaimRefusal("mine", "SandboxClaim/mine")},
		admissionCase{name: "controller changes the claim-uid label", as: asController, target: "mine",
			patch: `{"metadata":{"labels":{"` + extv1alpha1.ClaimUIDLabel + `":"other"}}}`},
		// A warm claim's env goes to sandboxd through the Sandbox's session-env annotation: a
		// tenant must not put env there past its template's envVarsInjectionPolicy.
		admissionCase{name: "tenant gives its claim's Sandbox a session env", as: asTenant, target: "mine",
			patch:  `{"metadata":{"annotations":{"` + agentsv1alpha1.SessionEnvAnnotation + `":"{\"LD_PRELOAD\":\"/workspace/x.so\"}"}}}`,
			policy: ownershipPolicy, want: sessionEnvRefusal},
		admissionCase{name: "tenant creates a Sandbox with a session env in v1beta1", as: asTenant, version: "v1beta1",
			create: `metadata: {annotations: {` + agentsv1alpha1.SessionEnvAnnotation + `: '{"A":"b"}'}}`, policy: ownershipPolicy, want: sessionEnvRefusal},
		admissionCase{name: "controller gives a claim's Sandbox its session env", as: asController, target: "mine",
			patch: `{"metadata":{"annotations":{"` + agentsv1alpha1.SessionEnvAnnotation + `":"{\"A\":\"b\"}"}}}`},
	)
	runAdmissionCases(t, ns, ids, cases)
}

// hostRefusal is the host-access policy's message for a field.
func hostRefusal(field, what string) string {
	return field + ": " + what + " not allowed in this namespace; a cluster admin allows it by labelling the namespace " +
		"agents.x-k8s.io/host-access=allowed"
}

func hostListRefusal(fields, what string) string {
	return fields + ": " + what + " are not allowed in this namespace; a cluster admin allows it by labelling the namespace " +
		"agents.x-k8s.io/host-access=allowed"
}

// Host-level pod specs are refused, whoever asks, in namespaces not labelled
// agents.x-k8s.io/host-access=allowed, for Sandboxes and SandboxTemplates in both versions.
func TestHostLevelPodSpecsNeedAnOptedInNamespace(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	mustCreateObj(t, testwrap.MakeSandbox(ns, "plain").Obj())
	container := func(sc string) string {
		return "{name: runtime, image: runtime:1, securityContext: " + sc + "}"
	}
	pod := func(spec string) string { return "spec: {podTemplate: {spec: " + spec + "}}" }
	netRefusal := hostRefusal("spec.podTemplate.spec.hostNetwork", "the host's network namespace is")
	cases := []admissionCase{
		{name: "hostNetwork", as: asTenant, create: pod("{hostNetwork: true}"), policy: hostAccessPolicy, want: netRefusal},
		{name: "hostPID", as: asTenant, create: pod("{hostPID: true}"), policy: hostAccessPolicy,
			want: hostRefusal("spec.podTemplate.spec.hostPID", "the host's process namespace is")},
		{name: "hostIPC", as: asTenant, create: pod("{hostIPC: true}"), policy: hostAccessPolicy,
			want: hostRefusal("spec.podTemplate.spec.hostIPC", "the host's IPC namespace is")},
		{name: "a privileged container", as: asTenant, create: pod("{containers: [" + container("{privileged: true}") + "]}"), policy: hostAccessPolicy,
			want: hostListRefusal("spec.podTemplate.spec.containers[runtime].securityContext.privileged", "privileged containers")},
		{name: "a privileged init container", as: asTenant, create: pod("{initContainers: [{name: init, image: i, securityContext: {privileged: true}}]}"),
			policy: hostAccessPolicy, want: hostListRefusal("spec.podTemplate.spec.initContainers[init].securityContext.privileged", "privileged containers")},
		{name: "a privileged ephemeral container", as: asTenant, create: pod("{ephemeralContainers: [{name: debug, image: d, securityContext: {privileged: true}}]}"),
			policy: hostAccessPolicy, want: hostListRefusal("spec.podTemplate.spec.ephemeralContainers[debug].securityContext.privileged", "privileged containers")},
		{name: "added capabilities", as: asTenant, create: pod("{containers: [" + container("{capabilities: {add: [NET_ADMIN]}}") + "]}"), policy: hostAccessPolicy,
			want: hostListRefusal("spec.podTemplate.spec.containers[runtime].securityContext.capabilities.add", "added capabilities")},
		{name: "capabilities added to an init container", as: asTenant,
			create: pod("{initContainers: [{name: init, image: i, securityContext: {capabilities: {add: [SYS_ADMIN]}}}]}"), policy: hostAccessPolicy,
			want: hostListRefusal("spec.podTemplate.spec.initContainers[init].securityContext.capabilities.add", "added capabilities")},
		{name: "a hostPath volume", as: asTenant, create: pod("{volumes: [{name: root, hostPath: {path: /}}]}"), policy: hostAccessPolicy,
			want: hostListRefusal("spec.podTemplate.spec.volumes[root].hostPath", "hostPath volumes")},
		{name: "hostNetwork in v1beta1", as: asTenant, version: "v1beta1", create: pod("{hostNetwork: true}"), policy: hostAccessPolicy, want: netRefusal},
		{name: "hostNetwork, as a cluster admin", as: asAdmin, create: pod("{hostNetwork: true}"), policy: hostAccessPolicy, want: netRefusal},
		{name: "a template with hostNetwork", as: asAdmin, kind: "SandboxTemplate", create: pod("{hostNetwork: true}"), policy: hostAccessPolicy, want: netRefusal},
		{name: "a template with a hostPath volume in v1beta1", as: asAdmin, kind: "SandboxTemplate", version: "v1beta1",
			create: pod("{volumes: [{name: root, hostPath: {path: /}}]}"), policy: hostAccessPolicy,
			want: hostListRefusal("spec.podTemplate.spec.volumes[root].hostPath", "hostPath volumes")},
		{name: "tenant turns hostPID on", as: asTenant, target: "plain", patch: `{"spec":{"podTemplate":{"spec":{"hostPID":true}}}}`, policy: hostAccessPolicy,
			want: hostRefusal("spec.podTemplate.spec.hostPID", "the host's process namespace is")},
		{name: "everything off and dropped capabilities", as: asTenant,
			create: pod("{hostNetwork: false, hostPID: false, hostIPC: false, containers: [" + container("{privileged: false, capabilities: {drop: [ALL], add: []}}") + "]}")},
		{name: "other volumes", as: asTenant, create: pod("{volumes: [{name: scratch, emptyDir: {}}]}")},
	}
	runAdmissionCases(t, ns, ids, cases)

	opted := newNamespace(t)
	labelNamespace(t, opted, "agents.x-k8s.io/host-access", "allowed")
	optedIDs := identitiesIn(t, opted)
	everything := pod("{hostNetwork: true, hostPID: true, hostIPC: true, volumes: [{name: root, hostPath: {path: /}}], containers: [" +
		container("{privileged: true, capabilities: {add: [SYS_ADMIN]}}") + "]}")
	t.Run("in a namespace labelled agents.x-k8s.io/host-access=allowed", func(t *testing.T) {
		runAdmissionCases(t, opted, optedIDs, []admissionCase{
			{name: "tenant creates a Sandbox with all of them", as: asTenant, create: everything},
			{name: "tenant creates one in v1beta1", as: asTenant, version: "v1beta1", create: everything},
			{name: "cluster admin creates a template with all of them", as: asAdmin, kind: "SandboxTemplate", create: everything},
		})
	})
}

func labelNamespace(t *testing.T, ns, key, value string) {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if err := k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// The policies the chart renders are config/admission's, and admission.enabled=false leaves
// them out; agent-sandbox-network-admin joins admin only.
func TestAdmissionPoliciesAreTheSameInTheChartAndKustomize(t *testing.T) {
	want := map[string]*unstructured.Unstructured{}
	for _, o := range kustomize(t, "config/admission") {
		want[o.GetKind()+"/"+o.GetName()] = o
	}
	if len(want) != 20 {
		t.Fatalf("config/admission has %d objects, want 10 policies and 10 bindings", len(want))
	}
	objs, err := helmTemplate(t, "agent-sandbox-system")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			got[o.GetKind()+"/"+o.GetName()] = o
		}
		if o.GetKind() == "ClusterRole" && o.GetName() == "agent-sandbox-network-admin" {
			l := o.GetLabels()
			if l["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" || l["rbac.authorization.k8s.io/aggregate-to-edit"] != "" {
				t.Errorf("chart agent-sandbox-network-admin labels %v, want aggregation to admin only", l)
			}
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if !reflect.DeepEqual(g.Object["spec"], w.Object["spec"]) {
			t.Errorf("chart %s spec %v\nwant config/admission's %v", k, g.Object["spec"], w.Object["spec"])
		}
	}
	if extra := len(got) - len(want); extra != 0 {
		t.Errorf("the chart renders %v, want exactly config/admission's %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	off, err := helmTemplate(t, "agent-sandbox-system", "admission.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range off {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			t.Errorf("admission.enabled=false still renders %s %s", o.GetKind(), o.GetName())
		}
	}
	for _, o := range decodeObjects(t, mustRead(t, filepath.Join(repoRoot, "config/rbac/client_roles.yaml"))) {
		if o.GetName() == "agent-sandbox-network-admin" {
			if l := o.GetLabels(); l["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" || l["rbac.authorization.k8s.io/aggregate-to-edit"] != "" {
				t.Errorf("kustomize agent-sandbox-network-admin labels %v, want aggregation to admin only", l)
			}
		}
	}
}
