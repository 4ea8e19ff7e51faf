package storageversion

import (
	"testing"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func claimFor(template string, warmpool *extv1alpha1.WarmPoolPolicy) *extv1alpha1.SandboxClaim {
	return &extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Annotations: map[string]string{"team": "a"}},
		Spec:       extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: template}, WarmPool: warmpool},
	}
}

func policy(p extv1alpha1.WarmPoolPolicy) *extv1alpha1.WarmPoolPolicy { return &p }

func TestOnlyAClaimTheStorageVersionSaysWhollyIsCreatedInIt(t *testing.T) {
	cases := []struct {
		name     string
		claim    *extv1alpha1.SandboxClaim
		lossless bool
		wantRef  string
	}{
		{"warmpool unset (v1alpha1's default applies)", claimFor("py", nil), true, "shadow-pool-py"},
		{"warmpool default", claimFor("py", policy(extv1alpha1.WarmPoolPolicyDefault)), true, "shadow-pool-py"},
		{"a template with a named pool", claimFor("py", policy("fast")), false, ""},
		{"warmpool none", claimFor("py", policy("none")), false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			unset := tc.claim.Spec.WarmPool == nil
			beta, lossless := storedForm(tc.claim)
			if lossless != tc.lossless {
				t.Fatalf("lossless = %v, want %v", lossless, tc.lossless)
			}
			if !lossless {
				return
			}
			if beta.Spec.WarmPoolRef.Name != tc.wantRef || beta.Annotations["team"] != "a" {
				t.Errorf("stored form %+v %v; want warmPoolRef %q and the claim's own annotations", beta.Spec, beta.Annotations, tc.wantRef)
			}
			back := &extv1alpha1.SandboxClaim{}
			if err := servedForm(beta, back); err != nil {
				t.Fatal(err)
			}
			if back.Spec.TemplateRef.Name != "py" || back.Spec.WarmPool == nil || *back.Spec.WarmPool != extv1alpha1.WarmPoolPolicyDefault {
				t.Errorf("served back as %+v; want template py with warmpool default", back.Spec)
			}
			if unset && tc.claim.Spec.WarmPool != nil {
				t.Error("the caller's claim was changed; want the default applied to a copy")
			}
		})
	}
}

func TestAWatchInTheStorageVersionServesV1alpha1AndStopsWhileAnEventWaits(t *testing.T) {
	in := watch.NewRaceFreeFake()
	w := newServedWatch(in)
	beta := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "7"},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "shadow-pool-py"}}}
	in.Add(beta)
	ev := <-w.ResultChan()
	got, ok := ev.Object.(*extv1alpha1.SandboxClaim)
	if !ok || got.Spec.TemplateRef.Name != "py" || got.ResourceVersion != "7" {
		t.Fatalf("event %T %+v; want the v1alpha1 claim of template py at resourceVersion 7", ev.Object, ev.Object)
	}
	in.Add(beta.DeepCopy()) // never read: Stop must not leave the loop blocked on it (goleak)
	w.Stop()
	w.Stop()
}
