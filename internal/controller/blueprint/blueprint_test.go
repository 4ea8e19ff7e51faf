package blueprint

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// plain is a builder with no installation defaults (no router labels, no runtime class).
var plain = Builder{}

// template is the base every case varies: one container, a pod label, a volume.
func template() *testwrap.TemplateWrapper {
	return testwrap.MakeTemplate("ns", "python").PodLabel("team", "a").
		Volume(testwrap.MakeVolumeClaim("home", "1Gi").Obj(), "/home/agent")
}

func TestHashIgnoresWhatDoesNotShapeThePod(t *testing.T) {
	cases := []struct {
		name string
		edit func(*testwrap.TemplateWrapper)
	}{
		{"nothing changed (a fresh copy)", func(*testwrap.TemplateWrapper) {}},
		{"the template's own labels", func(w *testwrap.TemplateWrapper) { w.Label("owner", "platform") }},
		{"the template's own annotations", func(w *testwrap.TemplateWrapper) { w.Annotation("note", "edited") }},
		{"pod labels", func(w *testwrap.TemplateWrapper) { w.PodLabel("team", "b") }},
		{"pod annotations", func(w *testwrap.TemplateWrapper) { w.PodAnnotation("why", "test") }},
		{"the env injection policy", func(w *testwrap.TemplateWrapper) { w.EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed) }},
		{"the network policy", func(w *testwrap.TemplateWrapper) {
			w.NetworkPolicy(&extv1alpha1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}})
		}},
		{"network policy management", func(w *testwrap.TemplateWrapper) {
			w.NetworkPolicyManagement(extv1alpha1.NetworkPolicyManagementUnmanaged)
		}},
	}
	base := plain.Hash(template().Hub())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := template()
			tc.edit(w)
			if got := plain.Hash(w.Hub()); got != base {
				t.Errorf("hash %s, want %s: this edit must not make warm sandboxes stale", got, base)
			}
		})
	}
}

func TestHashChangesWithThePodSpecAndVolumes(t *testing.T) {
	cases := []struct {
		name string
		edit func(*testwrap.TemplateWrapper)
	}{
		{"image", func(w *testwrap.TemplateWrapper) { w.Image("sandbox-runtime:v2") }},
		{"command", func(w *testwrap.TemplateWrapper) { w.Command("python") }},
		{"env", func(w *testwrap.TemplateWrapper) { w.Env("NEW", "1") }},
		{"a volume mount", func(w *testwrap.TemplateWrapper) { w.VolumeMount("scratch", "/tmp/scratch") }},
		{"the service account token", func(w *testwrap.TemplateWrapper) { w.AutomountServiceAccountToken(ptr.To(true)) }},
		{"another volume claim template", func(w *testwrap.TemplateWrapper) { w.Volume(testwrap.MakeVolumeClaim("cache", "1Gi").Obj(), "") }},
		{"a volume claim's label", func(w *testwrap.TemplateWrapper) {
			w.Volume(testwrap.MakeVolumeClaim("cache", "1Gi").Label("purpose", "cache").Obj(), "")
		}},
	}
	base := plain.Hash(template().Hub())
	seen := map[string]string{base: "the base template"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := template()
			tc.edit(w)
			got := plain.Hash(w.Hub())
			if other, dup := seen[got]; dup {
				t.Errorf("hash %s is the same as for %s: the edit must make warm sandboxes stale", got, other)
			}
			seen[got] = tc.name
		})
	}
}

func TestHashIsALabelValue(t *testing.T) {
	if h := plain.Hash(template().Hub()); !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(h) {
		t.Errorf("hash %q, want 16 lower-case hex digits", h)
	}
}

// A stored revision (UID and resourceVersion) never changes, so its hash is remembered.
func TestHashRemembersARevision(t *testing.T) {
	rev := template().UID("u-remember").ResourceVersion("7").Hub()
	first := plain.Hash(rev)
	rev.Spec.PodTemplate.Spec.Containers[0].Image = "changed-behind-the-cache"
	if got := plain.Hash(rev); got != first {
		t.Errorf("hash of revision u-remember/7 = %s, want the remembered %s", got, first)
	}
	next := rev.DeepCopy()
	next.ResourceVersion = "8"
	if got := plain.Hash(next); got == first {
		t.Errorf("hash of the next revision = %s, want it computed afresh from the new image", got)
	}
}

// Revisions of edited and deleted templates fall out of the cache: it never holds more than
// hashCacheSize, and every revision, remembered or not, still gets its own hash.
func TestHashForgetsOldRevisions(t *testing.T) {
	revs := make([]*extv1beta1.SandboxTemplate, hashCacheSize+100)
	for i := range revs {
		revs[i] = template().UID(types.UID(fmt.Sprintf("u-bounded-%d", i))).ResourceVersion("1").
			Image(fmt.Sprintf("img:%d", i)).Hub()
		_ = plain.Hash(revs[i])
	}
	if got := hashCache.Len(); got != hashCacheSize {
		t.Errorf("cache holds %d revisions after %d were hashed, want the bound, %d", got, len(revs), hashCacheSize)
	}
	for _, i := range []int{0, len(revs) / 2, len(revs) - 1} { // forgotten, and remembered
		if got, want := plain.Hash(revs[i]), plain.computeHash(revs[i]); got != want {
			t.Errorf("hash of revision %d = %s, want %s (from its own pod spec)", i, got, want)
		}
	}
}

func TestNewSandboxCopiesTheTemplate(t *testing.T) {
	tmpl := template().Hub()
	sb := plain.NewSandbox(tmpl)
	if sb.Namespace != "ns" || sb.Name != "" || sb.GenerateName != "" {
		t.Errorf("sandbox %s/%s (generateName %q), want an unnamed Sandbox in the template's namespace", sb.Namespace, sb.Name, sb.GenerateName)
	}
	if d := cmp.Diff(tmpl.Spec.VolumeClaimTemplates, sb.Spec.VolumeClaimTemplates); d != "" {
		t.Errorf("volume claim templates (-template +sandbox):\n%s", d)
	}
	// The hardening defaults are the only difference (TestNewSandboxHardensThePod).
	ignoreSecurity := cmpopts.IgnoreFields(corev1.Container{}, "SecurityContext")
	if d := cmp.Diff(tmpl.Spec.PodTemplate.Spec.Containers, sb.Spec.PodTemplate.Spec.Containers, ignoreSecurity); d != "" {
		t.Errorf("containers (-template +sandbox):\n%s", d)
	}
	sb.Spec.PodTemplate.Spec.Containers[0].Image = "edited"
	sb.Spec.PodTemplate.ObjectMeta.Labels["team"] = "edited"
	sb.Spec.VolumeClaimTemplates[0].Name = "edited"
	if tmpl.Spec.PodTemplate.Spec.Containers[0].Image != testwrap.RuntimeImage || tmpl.Spec.PodTemplate.ObjectMeta.Labels["team"] != "a" ||
		tmpl.Spec.VolumeClaimTemplates[0].Name != "home" {
		t.Errorf("editing the Sandbox changed the template: %+v", tmpl.Spec)
	}
}

func TestNewSandboxIdentifiesItsTemplate(t *testing.T) {
	tmpl := template().Hub()
	sb := plain.NewSandbox(tmpl)
	ref := sb.Labels[extv1beta1.TemplateRefHashLabel]
	cases := []struct {
		what, got, want string
	}{
		{"label " + extv1beta1.TemplateHashLabel, sb.Labels[extv1beta1.TemplateHashLabel], plain.Hash(tmpl)},
		{"annotation " + extv1beta1.TemplateRefAnnotation, sb.Annotations[extv1beta1.TemplateRefAnnotation], "python"},
		{"pod label " + extv1beta1.TemplateRefHashLabel + " (the template's NetworkPolicy selects on it)",
			sb.Spec.PodTemplate.ObjectMeta.Labels[extv1beta1.TemplateRefHashLabel], ref},
		{"label " + extv1beta1.TemplateRefHashLabel + " of another Sandbox of the template",
			plain.NewSandbox(template().Image("other").Hub()).Labels[extv1beta1.TemplateRefHashLabel], ref},
	}
	if ref == "" {
		t.Fatalf("labels %v lack %s", sb.Labels, extv1beta1.TemplateRefHashLabel)
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	other := plain.NewSandbox(testwrap.MakeTemplate("ns", "node").Hub())
	if other.Labels[extv1beta1.TemplateRefHashLabel] == ref {
		t.Errorf("templates python and node share the template-ref hash %s", ref)
	}
}

func TestNewSandboxLeavesOutReservedPodMetadata(t *testing.T) {
	gateway := podmeta.Rules{RouterLabels: map[string]string{"role": "gateway"}}
	cases := []struct {
		name       string
		rules      podmeta.Rules
		labels     map[string]string
		annotation [2]string
		wantLabels map[string]string // besides the template-ref hash label
		wantAnnots map[string]string
	}{
		{"open keys are kept", podmeta.Rules{}, map[string]string{"team": "a", "app.kubernetes.io/name": "agent"},
			[2]string{"example.com/owner", "me"}, map[string]string{"team": "a", "app.kubernetes.io/name": "agent"},
			map[string]string{"example.com/owner": "me"}},
		{"the router's label is left out", podmeta.Rules{}, map[string]string{"app": "sandbox-router", "team": "a"},
			[2]string{}, map[string]string{"team": "a"}, nil},
		{"the installation's router label is left out", gateway, map[string]string{"role": "gateway"},
			[2]string{}, map[string]string{}, nil},
		{"a controller label is left out", podmeta.Rules{}, map[string]string{extv1beta1.ClaimUIDLabel: "forged"},
			[2]string{}, map[string]string{}, nil},
		{"a reserved annotation is left out", podmeta.Rules{}, nil,
			[2]string{"kubernetes.io/egress-bandwidth", "1G"}, map[string]string{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := testwrap.MakeTemplate("ns", "tpl").PodLabels(tc.labels)
			if tc.annotation[0] != "" {
				w.PodAnnotation(tc.annotation[0], tc.annotation[1])
			}
			md := (Builder{PodRules: tc.rules}).NewSandbox(w.Hub()).Spec.PodTemplate.ObjectMeta
			delete(md.Labels, extv1beta1.TemplateRefHashLabel)
			if d := cmp.Diff(tc.wantLabels, md.Labels, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("pod labels (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantAnnots, md.Annotations, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("pod annotations (-want +got):\n%s", d)
			}
		})
	}
}

func TestNewSandboxAppliesSecureDefaults(t *testing.T) {
	publicDNS := &corev1.PodDNSConfig{Nameservers: []string{"8.8.8.8", "1.1.1.1"}}
	ownDNS := &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}
	cases := []struct {
		name          string
		tmpl          *extv1beta1.SandboxTemplate
		wantAutomount *bool
		wantDNSPolicy corev1.DNSPolicy
		wantDNSConfig *corev1.PodDNSConfig
	}{
		{"no API token unless asked; public resolvers under the secure-default policy",
			testwrap.MakeTemplate("ns", "t").Hub(), ptr.To(false), corev1.DNSNone, publicDNS},
		{"a token the template asks for is kept",
			testwrap.MakeTemplate("ns", "t").AutomountServiceAccountToken(ptr.To(true)).Hub(), ptr.To(true), corev1.DNSNone, publicDNS},
		{"the template's own NetworkPolicy keeps cluster DNS",
			testwrap.MakeTemplate("ns", "t").NetworkPolicy(&extv1alpha1.NetworkPolicySpec{}).Hub(), ptr.To(false), "", nil},
		{"a template with a domain allow-list keeps cluster DNS, where its policy sends lookups",
			testwrap.MakeTemplate("ns", "t").Annotation(agentsv1beta1.EgressDomainsAnnotation, "pypi.org").Hub(), ptr.To(false), "", nil},
		{"an Unmanaged template keeps cluster DNS",
			testwrap.MakeTemplate("ns", "t").NetworkPolicyManagement(extv1alpha1.NetworkPolicyManagementUnmanaged).Hub(), ptr.To(false), "", nil},
		{"the template's DNS policy is kept",
			withDNS(testwrap.MakeTemplate("ns", "t").Hub(), corev1.DNSClusterFirst, nil), ptr.To(false), corev1.DNSClusterFirst, nil},
		{"the template's DNS config is kept",
			withDNS(testwrap.MakeTemplate("ns", "t").Hub(), "", ownDNS), ptr.To(false), "", ownDNS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := plain.NewSandbox(tc.tmpl).Spec.PodTemplate.Spec
			if d := cmp.Diff(tc.wantAutomount, spec.AutomountServiceAccountToken); d != "" {
				t.Errorf("automountServiceAccountToken (-want +got):\n%s", d)
			}
			if spec.DNSPolicy != tc.wantDNSPolicy {
				t.Errorf("dnsPolicy %q, want %q", spec.DNSPolicy, tc.wantDNSPolicy)
			}
			if d := cmp.Diff(tc.wantDNSConfig, spec.DNSConfig); d != "" {
				t.Errorf("dnsConfig (-want +got):\n%s", d)
			}
		})
	}
}

func withDNS(tmpl *extv1beta1.SandboxTemplate, policy corev1.DNSPolicy, cfg *corev1.PodDNSConfig) *extv1beta1.SandboxTemplate {
	tmpl.Spec.PodTemplate.Spec.DNSPolicy = policy
	tmpl.Spec.PodTemplate.Spec.DNSConfig = cfg
	return tmpl
}
