// Package podmeta decides which labels and annotations tenant-written metadata (a claim's
// additionalPodMetadata, a template's pod labels, a Sandbox's pod template) may put on a sandbox
// pod. Two kinds of key are refused:
//
//   - keys in domains reserved for Kubernetes and for this system (kubernetes.io, k8s.io,
//     agents.x-k8s.io and their subdomains), which controllers, Services and NetworkPolicies
//     select on; app.kubernetes.io (the recommended application labels) stays open;
//   - a label pair the sandbox router's pods carry: the templates' default NetworkPolicy admits
//     ingress from those pods, so a sandbox wearing them could reach every other sandbox.
package podmeta

import (
	"fmt"
	"sort"
	"strings"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// ReservedDomains are the label and annotation key domains (with their subdomains) that tenant
// metadata may not use.
var ReservedDomains = []string{"kubernetes.io", "k8s.io", "agents.x-k8s.io"}

// openDomains are subdomains of a reserved domain that are meant for users.
var openDomains = []string{"app.kubernetes.io"}

// openAnnotations are reserved-domain annotations a tenant may still set.
var openAnnotations = map[string]bool{
	// Tells the cluster autoscaler whether it may evict the pod; a scheduling hint, no privilege.
	"cluster-autoscaler.kubernetes.io/safe-to-evict": true,
}

// RouterIdentity are label pairs that always identify a sandbox router, whatever the router's
// configured labels: ours (app=sandbox-router) and the recommended-label form.
var RouterIdentity = map[string]string{
	agentsv1beta1.RouterPodLabel: agentsv1beta1.RouterPodLabelValue,
	"app.kubernetes.io/name":     agentsv1beta1.RouterPodLabelValue,
}

// Rules carry the installation's router labels; the zero value refuses RouterIdentity only.
type Rules struct {
	// RouterLabels are the labels of the router's pods (the controller's --router-pod-labels).
	RouterLabels map[string]string
}

// Reserved reports whether key lies in a reserved domain.
func Reserved(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range openDomains {
		if domain == d {
			return false
		}
	}
	for _, d := range ReservedDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// PosesAsRouter reports whether the label pair k=v is one a router pod carries.
func (r Rules) PosesAsRouter(k, v string) bool {
	if want, ok := RouterIdentity[k]; ok && want == v {
		return true
	}
	want, ok := r.RouterLabels[k]
	return ok && want == v
}

// LabelProblem says why a tenant may not set the pod label k=v, or "" when it may.
func (r Rules) LabelProblem(k, v string) string {
	switch {
	case r.PosesAsRouter(k, v):
		return fmt.Sprintf("label %s=%s identifies the sandbox router; a sandbox may not carry it", k, v)
	case Reserved(k):
		return fmt.Sprintf("label key %q is in a reserved domain (%s)", k, strings.Join(ReservedDomains, ", "))
	}
	return ""
}

// AnnotationProblem says why a tenant may not set the pod annotation k, or "" when it may.
func AnnotationProblem(k string) string {
	if Reserved(k) && !openAnnotations[k] {
		return fmt.Sprintf("annotation key %q is in a reserved domain (%s)", k, strings.Join(ReservedDomains, ", "))
	}
	return ""
}

// Problems lists, sorted, every refused key of the given labels and annotations.
func (r Rules) Problems(labels, annotations map[string]string) []string {
	var out []string
	for k, v := range labels {
		if p := r.LabelProblem(k, v); p != "" {
			out = append(out, p)
		}
	}
	for k := range annotations {
		if p := AnnotationProblem(k); p != "" {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// WithoutRouterLabels returns labels minus the pairs that pose as the router (labels itself when
// there are none, so the common case does not allocate) and the refused pairs as "k=v".
func (r Rules) WithoutRouterLabels(labels map[string]string) (map[string]string, []string) {
	var dropped []string
	for k, v := range labels {
		if r.PosesAsRouter(k, v) {
			dropped = append(dropped, k+"="+v)
		}
	}
	if len(dropped) == 0 {
		return labels, nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if !r.PosesAsRouter(k, v) {
			out[k] = v
		}
	}
	sort.Strings(dropped)
	return out, dropped
}

// Filter returns copies of labels and annotations without the refused keys, and the problems
// found (sorted). Used for templates, whose authors are told by an event rather than refused.
func (r Rules) Filter(labels, annotations map[string]string) (map[string]string, map[string]string, []string) {
	problems := r.Problems(labels, annotations)
	if len(problems) == 0 {
		return labels, annotations, nil
	}
	keptLabels := map[string]string{}
	for k, v := range labels {
		if r.LabelProblem(k, v) == "" {
			keptLabels[k] = v
		}
	}
	keptAnnotations := map[string]string{}
	for k, v := range annotations {
		if AnnotationProblem(k) == "" {
			keptAnnotations[k] = v
		}
	}
	return keptLabels, keptAnnotations, problems
}
