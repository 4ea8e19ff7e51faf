package sandboxtemplate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPolicyName(t *testing.T) {
	if got := PolicyName("python"); got != "python-network-policy" {
		t.Errorf("PolicyName(python) = %q, want python-network-policy", got)
	}
}

// The policy selects exactly the pods of the template's Sandboxes, whatever its rules.
func TestDesiredSpecSelectsTheTemplatesPods(t *testing.T) {
	for _, tmpl := range []*extv1beta1.SandboxTemplate{
		testwrap.MakeTemplate("ns", "python").Hub(),
		testwrap.MakeTemplate("ns", "python").NetworkPolicy(&extv1alpha1.NetworkPolicySpec{}).Hub(),
	} {
		spec := New(nil, Options{}).desiredSpec(tmpl, templateDomains{})
		pod := blueprint.Builder{}.NewSandbox(tmpl).Spec.PodTemplate.ObjectMeta.Labels
		sel, err := metav1.LabelSelectorAsSelector(&spec.PodSelector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod)) {
			t.Errorf("podSelector %v (err %v) does not select the template's pods (labels %v)", spec.PodSelector, err, pod)
		}
		other := blueprint.Builder{}.NewSandbox(testwrap.MakeTemplate("ns", "node").Hub()).Spec.PodTemplate.ObjectMeta.Labels
		if sel.Matches(labels.Set(other)) {
			t.Errorf("podSelector %v selects the pods of template node too", spec.PodSelector)
		}
		want := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		if d := cmp.Diff(want, spec.PolicyTypes); d != "" {
			t.Errorf("policyTypes (-want +got), both directions default to deny:\n%s", d)
		}
	}
}

func TestDesiredSpecSecureDefault(t *testing.T) {
	cases := []struct {
		name       string
		router     RouterPeer
		wantNS     string
		wantLabels map[string]string
	}{
		{"admits the router where config/ deploys it", RouterPeer{}, "agent-sandbox-system", map[string]string{"app": "sandbox-router"}},
		{"admits the router the installation names", RouterPeer{Namespace: "gw", PodLabels: map[string]string{"role": "gateway"}},
			"gw", map[string]string{"role": "gateway"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := New(nil, Options{Router: tc.router}).desiredSpec(testwrap.MakeTemplate("ns", "t").Hub(), templateDomains{})
			want := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: tc.wantNS}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: tc.wantLabels},
			}}}}
			if d := cmp.Diff(want, spec.Ingress); d != "" {
				t.Errorf("ingress (-want +got):\n%s", d)
			}
		})
	}
}

func TestDesiredSpecSecureDefaultEgressIsPublicOnly(t *testing.T) {
	spec := New(nil, Options{}).desiredSpec(testwrap.MakeTemplate("ns", "t").Hub(), templateDomains{})
	blocks := map[string][]string{}
	for _, rule := range spec.Egress {
		if len(rule.Ports) != 0 {
			t.Errorf("egress rule %+v limits ports, want all ports to public addresses", rule)
		}
		for _, to := range rule.To {
			if to.IPBlock == nil {
				t.Fatalf("egress peer %+v is not an IP block", to)
			}
			blocks[to.IPBlock.CIDR] = to.IPBlock.Except
		}
	}
	want := map[string][]string{
		"0.0.0.0/0": {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"},
		"::/0":      {"fc00::/7", "fe80::/10"},
	}
	if d := cmp.Diff(want, blocks); d != "" {
		t.Errorf("egress allowed to (CIDR: except) (-want +got):\n%s", d)
	}
}

func TestDesiredSpecTakesCustomRulesVerbatimAndCopied(t *testing.T) {
	rules := &extv1beta1.NetworkPolicySpec{
		Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}}},
	}
	tmpl := testwrap.MakeTemplate("ns", "t").NetworkPolicy((*extv1alpha1.NetworkPolicySpec)(rules)).Hub()
	spec := New(nil, Options{}).desiredSpec(tmpl, templateDomains{})
	if spec.Ingress != nil {
		t.Errorf("ingress %+v, want none (deny all ingress) when the rules give none", spec.Ingress)
	}
	if d := cmp.Diff(tmpl.Spec.NetworkPolicy.Egress, spec.Egress); d != "" {
		t.Errorf("egress (-template +policy):\n%s", d)
	}
	spec.Egress[0].To[0].IPBlock.CIDR = "0.0.0.0/0"
	if got := tmpl.Spec.NetworkPolicy.Egress[0].To[0].IPBlock.CIDR; got != "203.0.113.0/24" {
		t.Errorf("editing the policy changed the template's rule to %s", got)
	}
}

func TestPodRulesRefuseTheConfiguredRoutersLabels(t *testing.T) {
	cases := []struct {
		name   string
		router RouterPeer
		label  [2]string
		refuse bool
	}{
		{"the default router's label", RouterPeer{}, [2]string{"app", "sandbox-router"}, true},
		{"an installation's router label", RouterPeer{Namespace: "gw", PodLabels: map[string]string{"role": "gateway"}}, [2]string{"role", "gateway"}, true},
		{"the same key with another value", RouterPeer{Namespace: "gw", PodLabels: map[string]string{"role": "gateway"}}, [2]string{"role", "worker"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := New(nil, Options{Router: tc.router}).PodRules().LabelProblem(tc.label[0], tc.label[1]) != ""
			if got != tc.refuse {
				t.Errorf("label %s=%s refused = %v, want %v", tc.label[0], tc.label[1], got, tc.refuse)
			}
		})
	}
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, extv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// ownPolicy is the policy the controller would have made for tmpl, with spec instead.
func ownPolicy(t *testing.T, s *runtime.Scheme, tmpl *extv1beta1.SandboxTemplate, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: PolicyName(tmpl.Name)}, Spec: spec}
	if err := controllerutil.SetControllerReference(tmpl, np, s); err != nil {
		t.Fatal(err)
	}
	return np
}

func TestReconcile(t *testing.T) {
	s := newScheme(t)
	tmpl := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").Hub()
	unmanaged := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").NetworkPolicyManagement(extv1alpha1.NetworkPolicyManagementUnmanaged).Hub()
	desired := New(nil, Options{}).desiredSpec(tmpl, templateDomains{})
	drifted := desired.DeepCopy()
	drifted.Egress = []networkingv1.NetworkPolicyEgressRule{{}} // allow everything
	foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: PolicyName("t")},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	cases := []struct {
		name       string
		objs       []client.Object
		wantPolicy *networkingv1.NetworkPolicySpec // nil: no policy
		wantOwned  bool
		wantEvent  string // prefix of the one event recorded; "" for none
	}{
		{"creates the policy, controlled by the template", []client.Object{tmpl}, &desired, true, ""},
		{"puts back a policy edited behind its back", []client.Object{tmpl, ownPolicy(t, s, tmpl, *drifted)}, &desired, true, ""},
		{"leaves a policy it does not own alone and says so", []client.Object{tmpl, foreign.DeepCopy()}, &foreign.Spec, false,
			"Warning " + extv1beta1.EventPolicyConflict + " NetworkPolicy t-network-policy exists and is not owned by this template"},
		{"Unmanaged removes its policy", []client.Object{unmanaged, ownPolicy(t, s, unmanaged, desired)}, nil, false, ""},
		{"Unmanaged without a policy does nothing", []client.Object{unmanaged}, nil, false, ""},
		{"a template being deleted is left to garbage collection",
			[]client.Object{testwrap.MakeTemplate("ns", "t").Deleting(time.Now()).Finalizers("test/hold").Hub()}, nil, false, ""},
		{"a template that is gone is no error", nil, nil, false, ""},
		{"reserved pod metadata is reported",
			[]client.Object{testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").PodLabel("app", "sandbox-router").Hub()}, &desired, true,
			"Warning " + extv1beta1.EventReservedPodMetadata + " left out of every Sandbox made from this template: label app=sandbox-router"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.objs...).Build()
			events := record.NewFakeRecorder(10)
			r := New(c, Options{Recorder: events})
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "t"}}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			np := &networkingv1.NetworkPolicy{}
			err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: PolicyName("t")}, np)
			switch {
			case tc.wantPolicy == nil && !apierrors.IsNotFound(err):
				t.Errorf("policy %+v (err %v), want none", np.Spec, err)
			case tc.wantPolicy != nil && err != nil:
				t.Errorf("policy: %v, want one", err)
			case tc.wantPolicy != nil:
				if d := cmp.Diff(*tc.wantPolicy, np.Spec); d != "" {
					t.Errorf("policy spec (-want +got):\n%s", d)
				}
				if owned := metav1.GetControllerOf(np) != nil && metav1.GetControllerOf(np).UID == "tmpl-uid"; owned != tc.wantOwned {
					t.Errorf("policy controlled by the template = %v, want %v (owners %v)", owned, tc.wantOwned, np.OwnerReferences)
				}
			}
			close(events.Events)
			var got []string
			for e := range events.Events {
				got = append(got, e)
			}
			switch {
			case tc.wantEvent == "" && len(got) != 0:
				t.Errorf("events %q, want none", got)
			case tc.wantEvent != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.wantEvent)):
				t.Errorf("events %q, want one starting %q", got, tc.wantEvent)
			}
		})
	}
}

// writeLog counts the writes that reach the API server through an interceptor.
type writeLog struct{ writes []string }

func (w *writeLog) funcs(inner interceptor.Funcs) interceptor.Funcs {
	log := func(verb string, obj client.Object) { w.writes = append(w.writes, verb+" "+obj.GetName()) }
	if inner.Create == nil {
		inner.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			log("create", obj)
			return c.Create(ctx, obj, opts...)
		}
	}
	if inner.Update == nil {
		inner.Update = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			log("update", obj)
			return c.Update(ctx, obj, opts...)
		}
	}
	if inner.Delete == nil {
		inner.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			log("delete", obj)
			return c.Delete(ctx, obj, opts...)
		}
	}
	return inner
}

func TestReconcileWritesOnlyWhatChanged(t *testing.T) {
	s := newScheme(t)
	tmpl := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").Hub()
	custom := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").NetworkPolicy(&extv1alpha1.NetworkPolicySpec{
		Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}}},
	}).Hub()
	r := New(nil, Options{})
	cases := []struct {
		name       string
		objs       []client.Object
		wantWrites []string
		wantPolicy networkingv1.NetworkPolicySpec
	}{
		{"a policy that matches is not written", []client.Object{tmpl, ownPolicy(t, s, tmpl, r.desiredSpec(tmpl, templateDomains{}))}, nil, r.desiredSpec(tmpl, templateDomains{})},
		{"the template's own rules replace the secure default", []client.Object{custom, ownPolicy(t, s, custom, r.desiredSpec(tmpl, templateDomains{}))},
			[]string{"update t-network-policy"}, r.desiredSpec(custom, templateDomains{})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &writeLog{}
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(tc.objs...).Build(), log.funcs(interceptor.Funcs{}))
			if _, err := New(c, Options{}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "t"}}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if d := cmp.Diff(tc.wantWrites, log.writes); d != "" {
				t.Errorf("writes (-want +got):\n%s", d)
			}
			np := &networkingv1.NetworkPolicy{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: PolicyName("t")}, np); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantPolicy, np.Spec); d != "" {
				t.Errorf("policy spec (-want +got):\n%s", d)
			}
		})
	}
}

// API errors fail the reconcile so it is retried; a create that loses to a policy the cache
// did not show yet is no error (the policy's own event brings the template back).
func TestReconcileAPIErrors(t *testing.T) {
	s := newScheme(t)
	tmpl := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").Hub()
	unmanaged := testwrap.MakeTemplate("ns", "t").UID("tmpl-uid").NetworkPolicyManagement(extv1alpha1.NetworkPolicyManagementUnmanaged).Hub()
	policies := schema.GroupResource{Group: networkingv1.GroupName, Resource: "networkpolicies"}
	boom := apierrors.NewInternalError(errors.New("etcd timeout"))
	isPolicy := func(o client.Object) bool { _, ok := o.(*networkingv1.NetworkPolicy); return ok }
	stale := ownPolicy(t, s, tmpl, networkingv1.NetworkPolicySpec{})
	cases := []struct {
		name    string
		objs    []client.Object
		funcs   interceptor.Funcs
		wantErr func(error) bool // nil: no error
	}{
		{name: "reading the policy fails", objs: []client.Object{tmpl},
			funcs: interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if isPolicy(obj) {
					return boom
				}
				return c.Get(ctx, key, obj, opts...)
			}},
			wantErr: apierrors.IsInternalError},
		{name: "creating the policy fails", objs: []client.Object{tmpl},
			funcs:   interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return boom }},
			wantErr: apierrors.IsInternalError},
		{name: "the cache did not show the policy yet: the create finds it there", objs: []client.Object{tmpl, ownPolicy(t, s, tmpl, networkingv1.NetworkPolicySpec{})},
			funcs: interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if isPolicy(obj) {
					return apierrors.NewNotFound(policies, key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			}}},
		{name: "the policy changed since it was read: the update conflicts", objs: []client.Object{tmpl, stale},
			funcs: interceptor.Funcs{Update: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.UpdateOption) error {
				return apierrors.NewConflict(policies, obj.GetName(), errors.New("the object has been modified"))
			}},
			wantErr: apierrors.IsConflict},
		{name: "deleting the policy of an Unmanaged template fails", objs: []client.Object{unmanaged, ownPolicy(t, s, unmanaged, networkingv1.NetworkPolicySpec{})},
			funcs:   interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error { return boom }},
			wantErr: apierrors.IsInternalError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(tc.objs...).Build(), tc.funcs)
			_, err := New(c, Options{}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "t"}})
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("Reconcile: %v, want no error", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Errorf("Reconcile error %v, want the API error (the template is retried)", err)
			}
		})
	}
}
