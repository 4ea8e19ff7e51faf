package v1alpha1_test

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	exthub "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentshub "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// fuzzIterations per kind and direction; every run uses a fresh seed (logged on failure).
const fuzzIterations = 300

// kinds pairs each hub (v1beta1, storage) type with its v1alpha1 spoke.
var kinds = []struct {
	name     string
	newHub   func() conversion.Hub
	newSpoke func() conversion.Convertible
}{
	{"Sandbox", func() conversion.Hub { return &agentshub.Sandbox{} }, func() conversion.Convertible { return &agentsv1alpha1.Sandbox{} }},
	{"SandboxClaim", func() conversion.Hub { return &exthub.SandboxClaim{} }, func() conversion.Convertible { return &extv1alpha1.SandboxClaim{} }},
	{"SandboxTemplate", func() conversion.Hub { return &exthub.SandboxTemplate{} }, func() conversion.Convertible { return &extv1alpha1.SandboxTemplate{} }},
	{"SandboxWarmPool", func() conversion.Hub { return &exthub.SandboxWarmPool{} }, func() conversion.Convertible { return &extv1alpha1.SandboxWarmPool{} }},
}

// valueFuncs keep the fuzzed values of the fields whose meaning the conversion maps (not
// copies) inside their schema's enum or bounds, as the API server guarantees for stored objects.
func valueFuncs(runtimeserializer.CodecFactory) []any {
	return []any{
		func(s *agentsv1alpha1.SandboxSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Replicas = []*int32{nil, ptr(int32(0)), ptr(int32(1))}[c.Intn(3)]
		},
		func(s *agentshub.SandboxSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.OperatingMode = []agentshub.SandboxOperatingMode{"", agentshub.SandboxOperatingModeRunning, agentshub.SandboxOperatingModeSuspended}[c.Intn(3)]
			s.Replicas = nil // refused at admission: never converted
		},
		func(s *extv1alpha1.SandboxClaimSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			policies := []extv1alpha1.WarmPoolPolicy{"", extv1alpha1.WarmPoolPolicyDefault, extv1alpha1.WarmPoolPolicyNone, "fast-pool", extv1alpha1.WarmPoolPolicy(c.String(8))}
			s.WarmPool = []*extv1alpha1.WarmPoolPolicy{nil, &policies[c.Intn(len(policies))]}[c.Intn(2)]
			if c.Intn(4) == 0 {
				s.TemplateRef.Name = ""
			}
		},
		func(s *exthub.SandboxClaimSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			refs := []string{"", "default", "none", "fast-pool", exthub.ShadowPoolPrefix + "python", exthub.ShadowPoolPrefix, c.String(8)}
			s.WarmPoolRef.Name = refs[c.Intn(len(refs))]
		},
		// The API server defaults volumeClaimTemplatesPolicy (Disallowed) in every stored template.
		func(s *exthub.SandboxTemplateSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			policies := []exthub.VolumeClaimTemplatesPolicy{exthub.VolumeClaimTemplatesPolicyDisallowed, exthub.VolumeClaimTemplatesPolicyAllowed, exthub.VolumeClaimTemplatesPolicyOverrides}
			s.VolumeClaimTemplatesPolicy = policies[c.Intn(len(policies))]
		},
	}
}

func newFiller(t *testing.T) *randfill.Filler {
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	codecs := runtimeserializer.NewCodecFactory(runtime.NewScheme())
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, valueFuncs), rand.NewSource(seed), codecs).
		NilChance(0.3).NumElements(0, 2).MaxDepth(12)
}

// TestRoundTripHubThroughV1alpha1: v1beta1 → v1alpha1 → v1beta1 gives back the object exactly.
func TestRoundTripHubThroughV1alpha1(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			f := newFiller(t)
			for i := 0; i < fuzzIterations; i++ {
				orig := k.newHub()
				f.Fill(orig)
				clearTypeMeta(orig)
				in := orig.DeepCopyObject().(conversion.Hub)
				spoke := k.newSpoke()
				if err := spoke.ConvertFrom(in); err != nil {
					t.Fatalf("ConvertFrom: %v", err)
				}
				back := k.newHub()
				if err := spoke.ConvertTo(back); err != nil {
					t.Fatalf("ConvertTo: %v", err)
				}
				if !apiequality.Semantic.DeepEqual(orig, back) {
					t.Fatalf("round trip lost data (-orig +back):\n%s", cmp.Diff(orig, back))
				}
				if !apiequality.Semantic.DeepEqual(orig, in) {
					t.Fatalf("conversion mutated its input (-orig +in):\n%s", cmp.Diff(orig, in))
				}
			}
		})
	}
}

// TestRoundTripV1alpha1ThroughHub: v1alpha1 → v1beta1 → v1alpha1 gives back the object exactly.
func TestRoundTripV1alpha1ThroughHub(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			f := newFiller(t)
			for i := 0; i < fuzzIterations; i++ {
				orig := k.newSpoke()
				f.Fill(orig)
				clearTypeMeta(orig)
				in := orig.DeepCopyObject().(conversion.Convertible)
				hub := k.newHub()
				if err := in.ConvertTo(hub); err != nil {
					t.Fatalf("ConvertTo: %v", err)
				}
				back := k.newSpoke()
				if err := back.ConvertFrom(hub); err != nil {
					t.Fatalf("ConvertFrom: %v", err)
				}
				if !apiequality.Semantic.DeepEqual(orig, back) {
					t.Fatalf("round trip lost data (-orig +back):\n%s", cmp.Diff(orig, back))
				}
				if !apiequality.Semantic.DeepEqual(orig, in) {
					t.Fatalf("conversion mutated its input (-orig +in):\n%s", cmp.Diff(orig, in))
				}
			}
		})
	}
}

func clearTypeMeta(o runtime.Object) {
	o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
}

func ptr[T any](v T) *T { return &v }
