package sandbox

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/blueprint"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandboxtemplate"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// fromTemplate is the Sandbox the controller makes from tmpl (as for a claim or a pool member),
// named testSB.
func fromTemplate(tmpl *extv1beta1.SandboxTemplate, edit ...func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
	sb := blueprint.Builder{}.NewSandbox(tmpl)
	sb.Name, sb.UID, sb.Generation = testSB, testUID, 1
	for _, e := range edit {
		e(sb)
	}
	return sb
}

// templatePolicyInForce runs the template controller once, as it runs when the template appears.
func (g *rig) templatePolicyInForce(template string) {
	g.t.Helper()
	r := sandboxtemplate.New(g.api, sandboxtemplate.Options{})
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: template}}); err != nil {
		g.t.Fatalf("template controller: %v", err)
	}
}

// A Sandbox made from a template gets no NetworkPolicy of its own where its template's policy
// already says everything its own would (one write less per pool member), and its own, before
// its pod, wherever that is not sure.
func TestATemplatesPolicyStandsInForTheSandboxsOwn(t *testing.T) {
	plain := testwrap.MakeTemplate(testNS, "python").Hub()
	noRouter := testwrap.MakeTemplate(testNS, "python").NetworkPolicy(&extv1alpha1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "frontend"}}}}}},
	}).Hub()
	tests := []struct {
		name            string
		tmpl            *extv1beta1.SandboxTemplate
		sb              *agentsv1beta1.Sandbox
		templatePolicy  bool // the template controller has written the template's policy
		foreignTemplate bool // a policy of the template's policy's name that is not the template's
		wantOwn         bool
	}{
		{name: "the template's default policy is in force: none of its own",
			tmpl: plain, sb: fromTemplate(plain), templatePolicy: true},
		{name: "the template's policy is not there yet: its own, before the pod",
			tmpl: plain, sb: fromTemplate(plain), wantOwn: true},
		{name: "a policy of that name that is not the template's: its own",
			tmpl: plain, sb: fromTemplate(plain), foreignTemplate: true, wantOwn: true},
		{name: "the template's rules do not let the router in: its own, which does",
			tmpl: noRouter, sb: fromTemplate(noRouter), templatePolicy: true, wantOwn: true},
		{name: "the Sandbox admits more pods: its own carries them",
			tmpl: plain, templatePolicy: true, wantOwn: true, sb: fromTemplate(plain, func(sb *agentsv1beta1.Sandbox) {
				sb.Annotations[agentsv1beta1.IngressFromPodsAnnotation] = "app=ax"
			})},
		{name: "its pod would not carry the label the template's policy selects: its own",
			tmpl: plain, templatePolicy: true, wantOwn: true, sb: fromTemplate(plain, func(sb *agentsv1beta1.Sandbox) {
				delete(sb.Spec.PodTemplate.ObjectMeta.Labels, extv1beta1.TemplateRefHashLabel)
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []client.Object{tt.sb, tt.tmpl}
			if tt.foreignTemplate {
				objs = append(objs, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: sandboxtemplate.PolicyName(tt.tmpl.Name)},
					Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
						extv1beta1.TemplateRefHashLabel: agentsv1beta1.NameHash(tt.tmpl.Name)}}}})
			}
			g := newRig(t, objs)
			if tt.templatePolicy {
				g.templatePolicyInForce(tt.tmpl.Name)
			}
			g.reconcile()
			if own := g.policy() != nil; own != tt.wantOwn {
				t.Errorf("a NetworkPolicy of its own: %v, want %v", own, tt.wantOwn)
			}
			if g.pod() == nil {
				t.Error("no pod, want one either way")
			}
			if c := g.condition(agentsv1beta1.SandboxConditionEgressPolicy); c != nil {
				t.Errorf("EgressPolicy condition %+v, want none (the Sandbox asks for no egress mode)", c)
			}
		})
	}
}
