package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/egress"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// effectiveEgress says what a sandbox may reach, for sbx get: a raw Sandbox's egress mode with
// its CIDRs and domains, a claim's template's domain list (or its networkPolicy), and the
// controller's EgressPolicy condition when it has one.
func effectiveEgress(ctx context.Context, c *sdk.Client, sb *sdk.Sandbox) string {
	obj := sb.Object()
	if !sb.IsClaim() {
		return describeEgress(obj, "", nil, nil)
	}
	name := sb.Status().Template
	tmpl := &extv1alpha1.SandboxTemplate{}
	err := c.KubeClient().Get(ctx, types.NamespacedName{Namespace: c.Namespace(), Name: name}, tmpl)
	return describeEgress(obj, name, tmpl.Annotations, err)
}

// describeEgress: obj may be nil (a claim without its Sandbox yet); template is "" for a raw
// Sandbox, else the claim's template with its annotations (or the error reading it).
func describeEgress(obj *agentsv1alpha1.Sandbox, template string, tmplAnnotations map[string]string, tmplErr error) string {
	var out string
	switch {
	case template == "":
		var ann map[string]string
		if obj != nil {
			ann = obj.Annotations
		}
		spec, requested, err := egress.FromAnnotations(ann)
		switch {
		case err != nil:
			out = "invalid: " + err.Error()
		case !requested:
			out = "allow-all (no egress annotations)"
		default:
			out = spec.Summary()
		}
	case tmplErr != nil:
		out = fmt.Sprintf("template %s's (unreadable: %v)", template, tmplErr)
	default:
		domains, failOpen, err := egress.TemplateDomains(tmplAnnotations)
		switch {
		case err != nil:
			out = fmt.Sprintf("template %s: DNS only (%v)", template, err)
		case len(domains) == 0:
			out = fmt.Sprintf("template %s's networkPolicy", template)
		case failOpen:
			out = fmt.Sprintf("template %s: DNS and %s (fail-open)", template, strings.Join(domains, ","))
		default:
			out = fmt.Sprintf("template %s: DNS and %s", template, strings.Join(domains, ","))
		}
	}
	if obj == nil {
		return out
	}
	if c := meta.FindStatusCondition(obj.Status.Conditions, agentsv1alpha1.SandboxConditionEgressPolicy); c != nil {
		out += fmt.Sprintf(" [%s %s: %s]", c.Type, c.Reason, c.Message)
	}
	return out
}
