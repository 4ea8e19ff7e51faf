package manager

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// unreachable is a rest.Config no API server answers; New must fail before it needs one.
var unreachable = &rest.Config{Host: "http://127.0.0.1:1"}

func TestNewRefusesAWebhookOnlyManagerWithoutTheWebhook(t *testing.T) {
	if _, err := New(unreachable, Options{WebhookOnly: true}); err == nil {
		t.Error("New(WebhookOnly, no Webhook) = nil error, want a refusal: such a manager would serve nothing")
	}
}

// Every kind the controllers read or write is in the scheme, in each version served.
func TestSchemeKnowsEveryKindServed(t *testing.T) {
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "agents.x-k8s.io", Version: "v1alpha1", Kind: "Sandbox"},
		{Group: "agents.x-k8s.io", Version: "v1beta1", Kind: "Sandbox"},
		{Group: "extensions.agents.x-k8s.io", Version: "v1alpha1", Kind: "SandboxClaim"},
		{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxClaim"},
		{Group: "extensions.agents.x-k8s.io", Version: "v1alpha1", Kind: "SandboxTemplate"},
		{Group: "extensions.agents.x-k8s.io", Version: "v1alpha1", Kind: "SandboxWarmPool"},
		{Version: "v1", Kind: "Pod"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
		{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not know %s", gvk)
		}
	}
}

func TestManagerOptions(t *testing.T) {
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	const defaultLeaseID = "agent-sandbox-controller.agents.x-k8s.io"
	tests := []struct {
		name  string
		opts  Options
		check func(t *testing.T, o ctrl.Options)
	}{
		{"the zero Options listen nowhere and elect no leader", Options{}, func(t *testing.T, o ctrl.Options) {
			if o.Metrics.BindAddress != "0" || o.HealthProbeBindAddress != "" || o.PprofBindAddress != "" {
				t.Errorf("metrics %q, probes %q, pprof %q; want metrics off (\"0\") and no listeners",
					o.Metrics.BindAddress, o.HealthProbeBindAddress, o.PprofBindAddress)
			}
			if o.LeaderElection {
				t.Error("leader election on, want off unless asked")
			}
			if o.LeaderElectionID != defaultLeaseID {
				t.Errorf("lease %q, want %q", o.LeaderElectionID, defaultLeaseID)
			}
			if o.LeaseDuration != nil || o.RenewDeadline != nil || o.RetryPeriod != nil {
				t.Error("lease timings set, want controller-runtime's defaults (nil)")
			}
			if o.Controller.SkipNameValidation != nil {
				t.Error("controller name validation skipped, want it on outside tests")
			}
		}},
		{"leader election with its timings", Options{LeaderElection: true, LeaderElectionID: "x", LeaderElectionNS: "ns",
			LeaseDuration: 6 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}, func(t *testing.T, o ctrl.Options) {
			got := []any{o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace, o.LeaderElectionReleaseOnCancel,
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod}
			want := []any{true, "x", "ns", true, ptr.To(6 * time.Second), ptr.To(4 * time.Second), ptr.To(time.Second)}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("leader election (-want +got):\n%s", d)
			}
		}},
		{"a webhook-only manager never runs for leader: it serves beside every replica",
			Options{WebhookOnly: true, LeaderElection: true}, func(t *testing.T, o ctrl.Options) {
				if o.LeaderElection {
					t.Error("leader election on for a webhook-only manager")
				}
			}},
		{"listeners where asked", Options{MetricsAddr: ":8443", ProbeAddr: ":8081", PprofAddr: ":6060"}, func(t *testing.T, o ctrl.Options) {
			if o.Metrics.BindAddress != ":8443" || o.HealthProbeBindAddress != ":8081" || o.PprofBindAddress != ":6060" {
				t.Errorf("metrics %q, probes %q, pprof %q", o.Metrics.BindAddress, o.HealthProbeBindAddress, o.PprofBindAddress)
			}
		}},
		{"tests may start several managers in one process", Options{SkipNameValidation: true}, func(t *testing.T, o ctrl.Options) {
			if o.Controller.SkipNameValidation == nil || !*o.Controller.SkipNameValidation {
				t.Error("controller name validation not skipped")
			}
		}},
		{"events are written, never read: no informer for them", Options{}, func(t *testing.T, o ctrl.Options) {
			if o.Client.Cache == nil || len(o.Client.Cache.DisableFor) != 1 {
				t.Fatalf("client cache options %+v, want events read around the cache", o.Client.Cache)
			}
			if _, ok := o.Client.Cache.DisableFor[0].(*corev1.Event); !ok {
				t.Errorf("uncached kind %T, want *corev1.Event", o.Client.Cache.DisableFor[0])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := managerOptions(tt.opts, s)
			if o.Scheme != s {
				t.Error("the manager does not use the scheme given")
			}
			tt.check(t, o)
		})
	}
}

// The pod, Service and PVC informers hold only what a Sandbox made (the tracking label), so the
// controller's memory follows the number of Sandboxes, not the cluster's size. Kinds whose
// strangers matter (a NetworkPolicy in the way of a Sandbox's own) are held whole.
func TestCacheHoldsOnlyWhatSandboxesMade(t *testing.T) {
	byObject := cacheOptions().ByObject
	tracked := labels.Set{agentsv1beta1.SandboxNameHashLabel: "abc"}
	stranger := labels.Set{"app": "web"}
	filtered := map[string]bool{}
	for obj, by := range byObject {
		kind := kindName(obj)
		if by.Label == nil {
			t.Errorf("%s: cached without a label selector", kind)
			continue
		}
		if !by.Label.Matches(tracked) || by.Label.Matches(stranger) {
			t.Errorf("%s: selector %q, want it to hold tracked objects only", kind, by.Label)
		}
		filtered[kind] = true
	}
	want := map[string]bool{"Pod": true, "Service": true, "PersistentVolumeClaim": true}
	if d := cmp.Diff(want, filtered); d != "" {
		t.Errorf("kinds cached by the tracking label (-want +got):\n%s", d)
	}
}

func kindName(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Pod:
		return "Pod"
	case *corev1.Service:
		return "Service"
	case *corev1.PersistentVolumeClaim:
		return "PersistentVolumeClaim"
	case *networkingv1.NetworkPolicy:
		return "NetworkPolicy"
	case *agentsv1beta1.Sandbox:
		return "Sandbox"
	case *extensionsv1alpha1.SandboxClaim:
		return "SandboxClaim"
	}
	return "unknown"
}

// A cached pod keeps what the controllers read (metadata, status, the node it runs on) and
// drops its spec and managedFields; every other kind loses its managedFields only.
func TestCacheTransformsKeepWhatIsRead(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{Name: "s1", Namespace: "ns", Labels: map[string]string{"a": "b"}, DeletionTimestamp: &now,
		Finalizers: []string{"f"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	pod := &corev1.Pod{ObjectMeta: *meta.DeepCopy(),
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "runtime", Image: "img"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}}}}
	opts := cacheOptions()
	var slim func(any) (any, error)
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			slim = by.Transform
		}
	}
	if slim == nil {
		t.Fatal("the pod informer has no transform, want the pod slimmed")
	}
	got, err := slim(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := pod.DeepCopy()
	want.ManagedFields = nil
	want.Spec = corev1.PodSpec{NodeName: "node-1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cached pod (-want +got):\n%s", d)
	}

	svc := &corev1.Service{ObjectMeta: *meta.DeepCopy(), Spec: corev1.ServiceSpec{ClusterIP: "None"}}
	got, err = opts.DefaultTransform(svc.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	wantSvc := svc.DeepCopy()
	wantSvc.ManagedFields = nil
	if d := cmp.Diff(wantSvc, got); d != "" {
		t.Errorf("cached Service (-want +got):\n%s", d)
	}
}
