// Package blueprint turns a SandboxTemplate into Sandboxes: the one place where the template's
// pod spec, volume claims, secure defaults and identifying labels are applied, shared by the
// warm pool and claim controllers so a warm Sandbox and a cold one are built the same way.
package blueprint

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
)

// Public resolvers used when a template's secure-default NetworkPolicy blocks cluster DNS.
var defaultNameservers = []string{"8.8.8.8", "1.1.1.1"}

// Builder makes Sandboxes from templates with the installation's pod rules and defaults. The
// warm pool and claim controllers share one, so a warm Sandbox and a cold one are the same.
type Builder struct {
	// PodRules filter the template's pod metadata (reserved keys, the router's labels).
	PodRules podmeta.Rules
	// RuntimeClassName is given to the pods of templates that name no runtime class (e.g.
	// "gvisor"); empty leaves them on the node's default runtime.
	RuntimeClassName string
}

// Hash identifies the parts of a template that shape a sandbox's pod and volumes, with the
// defaults this builder adds to them; metadata-only edits do not change it, so they never make
// warm sandboxes stale, while a new default runtime class or hardening revision does.
func (b Builder) Hash(tmpl *extv1beta1.SandboxTemplate) string {
	// Claims ask for the hash of the same template revision over and over on the hot path.
	key := hashKey{tmpl.UID, tmpl.ResourceVersion, b.RuntimeClassName}
	if tmpl.ResourceVersion != "" {
		if h, ok := hashCache.Get(key); ok {
			return h.(string)
		}
	}
	h := b.computeHash(tmpl)
	if tmpl.ResourceVersion != "" {
		hashCache.Add(key, h)
	}
	return h
}

type hashKey struct {
	uid     types.UID
	rv      string
	runtime string
}

// hashCacheSize bounds hashCache: far more revisions than claims ask for at once (the current
// one of each template in use), so the hot path always hits, while the revisions of edited and
// deleted templates fall out.
const hashCacheSize = 1024

// hashCache maps a template revision to its hash, least recently used out first.
var hashCache = lru.New(hashCacheSize)

func (b Builder) computeHash(tmpl *extv1beta1.SandboxTemplate) string {
	data, _ := json.Marshal(struct {
		Spec     corev1.PodSpec                                `json:"spec"`
		VCTs     []agentsv1beta1.PersistentVolumeClaimTemplate `json:"vcts,omitempty"`
		Defaults string                                        `json:"defaults"`
	}{tmpl.Spec.PodTemplate.Spec, tmpl.Spec.VolumeClaimTemplates, b.defaultsKey(&tmpl.Spec.PodTemplate.Spec)})
	h := fnv.New64a()
	_, _ = h.Write(data)
	return fmt.Sprintf("%016x", h.Sum64())
}

// NewSandbox returns an unnamed Sandbox built from the template, in the template's namespace.
// Pod labels and annotations the rules refuse (reserved domains, the router's identity) are left
// out; the template controller tells the template's author with an event.
func (b Builder) NewSandbox(tmpl *extv1beta1.SandboxTemplate) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{}
	sb.Namespace = tmpl.Namespace
	sb.Labels = map[string]string{
		extv1beta1.TemplateRefHashLabel: agentsv1beta1.NameHash(tmpl.Name),
		extv1beta1.TemplateHashLabel:    b.Hash(tmpl),
	}
	sb.Annotations = map[string]string{extv1beta1.TemplateRefAnnotation: tmpl.Name}
	// The template's idle pause applies to every Sandbox made from it (a claim's own wins).
	for _, k := range agentsv1beta1.IdleAnnotations {
		if v, ok := tmpl.Annotations[k]; ok {
			sb.Annotations[k] = v
		}
	}
	if tmpl.Spec.NetworkPolicyManagement == extv1beta1.NetworkPolicyManagementUnmanaged {
		// The template's author opened its Sandboxes to the cluster: no policy of their own either.
		sb.Annotations[agentsv1beta1.NetworkPolicyManagementAnnotation] = agentsv1beta1.NetworkPolicyUnmanaged
	}
	sb.Spec.PodTemplate = *tmpl.Spec.PodTemplate.DeepCopy()
	for _, v := range tmpl.Spec.VolumeClaimTemplates {
		sb.Spec.VolumeClaimTemplates = append(sb.Spec.VolumeClaimTemplates, *v.DeepCopy())
	}
	meta := &sb.Spec.PodTemplate.ObjectMeta
	meta.Labels, meta.Annotations, _ = b.PodRules.Filter(meta.Labels, meta.Annotations)
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	// The template's NetworkPolicy selects the pods by this label.
	meta.Labels[extv1beta1.TemplateRefHashLabel] = agentsv1beta1.NameHash(tmpl.Name)
	applySecureDefaults(&sb.Spec.PodTemplate.Spec, tmpl)
	harden(&sb.Spec.PodTemplate.Spec)
	b.applyRuntimeClass(&sb.Spec.PodTemplate.Spec)
	return sb
}

// applySecureDefaults: no API credentials unless asked; and where the template relies on the
// secure-default NetworkPolicy (which blocks private ranges, cluster DNS included), public
// resolvers so names still resolve. A template with a domain allow-list keeps the cluster DNS:
// its policy allows DNS there alone, and the policy engine learns the names' addresses from
// those lookups.
func applySecureDefaults(spec *corev1.PodSpec, tmpl *extv1beta1.SandboxTemplate) {
	if spec.AutomountServiceAccountToken == nil {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	managed := tmpl.Spec.NetworkPolicyManagement != extv1beta1.NetworkPolicyManagementUnmanaged
	_, listsDomains := tmpl.Annotations[agentsv1beta1.EgressDomainsAnnotation]
	if managed && tmpl.Spec.NetworkPolicy == nil && !listsDomains && spec.DNSPolicy == "" && spec.DNSConfig == nil {
		spec.DNSPolicy = corev1.DNSNone
		spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: defaultNameservers}
	}
}
