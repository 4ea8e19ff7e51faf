package sandbox

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The headless Service gives the Sandbox its stable DNS name: no cluster IP, selecting the pod
// by the name hash, one port per declared container port.
func TestServiceIsHeadlessAndSelectsThePod(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.reconcile()

	svc := g.service()
	if svc == nil {
		t.Fatal("no Service was created")
	}
	ownedBy(t, svc)
	want := corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone,
		Selector:  map[string]string{agentsv1beta1.SandboxNameHashLabel: agentsv1beta1.NameHash(testSB)},
		Ports:     []corev1.ServicePort{{Name: "http", Port: 8888, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8888)}},
	}
	if d := cmp.Diff(want, svc.Spec); d != "" {
		t.Errorf("Service spec (-want +got):\n%s", d)
	}
	if !podSelectedBy(g.pod(), svc) {
		t.Errorf("Service selector %v does not select the pod (labels %v)", svc.Spec.Selector, g.pod().Labels)
	}
}

func podSelectedBy(pod *corev1.Pod, svc *corev1.Service) bool {
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			return false
		}
	}
	return len(svc.Spec.Selector) > 0
}

// Without a Service the pod still runs and is reachable by IP; the Ready message says why
// serviceFQDN is empty. Someone else's Service is never touched.
func TestNoServiceWhenTheNameIsTakenOrUnfit(t *testing.T) {
	theirs := foreign(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSB},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"}}})
	tests := []struct {
		name    string
		objs    []client.Object
		wantMsg string
	}{
		{"a Service of the name is someone else's", []client.Object{aSandbox().Hub(), theirs}, "is not owned by this sandbox"},
		{"the name is no DNS-1035 label", []client.Object{testwrap.MakeSandbox(testNS, "1st").UID(testUID).Hub()}, "not a valid Service name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, tt.objs)
			g.reconcile()
			if n := g.count("create", "Service") + g.count("patch", "Service"); n != 0 {
				t.Errorf("%d Service writes, want none", n)
			}
			if g.pod() == nil {
				t.Error("no pod: a missing Service must not keep the pod from running")
			}
			st := g.sandbox().Status
			if st.Service != "" || st.ServiceFQDN != "" {
				t.Errorf("status service %q fqdn %q, want both empty", st.Service, st.ServiceFQDN)
			}
			if c := g.condition(agentsv1beta1.SandboxConditionReady); c == nil || !strings.Contains(c.Message, tt.wantMsg) {
				t.Errorf("Ready %+v, want its message to say %q", c, tt.wantMsg)
			}
		})
	}
}

// The Service follows the template's ports, and a selector someone changed is put back.
func TestServiceDriftIsPutBack(t *testing.T) {
	g := newRig(t, []client.Object{aSandbox().Hub()})
	g.reconcile()
	svc := g.service()
	g.update(svc, func() { svc.Spec.Selector = map[string]string{"app": "elsewhere"} })
	sb := g.sandbox()
	g.update(sb, func() {
		sb.Spec.PodTemplate.Spec.Containers[0].Ports = append(sb.Spec.PodTemplate.Spec.Containers[0].Ports,
			corev1.ContainerPort{Name: "web", ContainerPort: 3000})
	})
	g.reconcile()

	svc = g.service()
	if !podSelectedBy(g.pod(), svc) {
		t.Errorf("Service selector %v, want the pod's name hash back", svc.Spec.Selector)
	}
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	if d := cmp.Diff([]int32{8888, 3000}, ports); d != "" {
		t.Errorf("Service ports (-want +got):\n%s", d)
	}
}

// The Service created a moment ago and not yet in the cache is not created again; one the
// cache cannot show (its labels were stripped) is read from the API and kept.
func TestAServiceTheCacheDoesNotShow(t *testing.T) {
	t.Run("created moments ago", func(t *testing.T) {
		g := newRig(t, []client.Object{aSandbox().Hub()})
		g.hide("Service")
		g.reconcile()
		g.reconcile()
		if n := g.count("create", "Service"); n != 1 {
			t.Errorf("Service created %d times while the cache lagged, want 1", n)
		}
		if st := g.sandbox().Status; st.Service != testSB {
			t.Errorf("status.service = %q, want %q", st.Service, testSB)
		}
	})
	t.Run("ours, outside the cache", func(t *testing.T) {
		sb := aSandbox().Hub()
		ours := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testSB,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, sandboxGVK)}}}
		g := newRig(t, []client.Object{sb, ours})
		g.hide("Service")
		if _, err := g.reconcileErr(); err != nil {
			t.Fatalf("Reconcile = %v, want AlreadyExists handled", err)
		}
		if svc := g.service(); !podSelectedBy(g.pod(), svc) {
			t.Errorf("Service selector %v, want it to select the pod again", svc.Spec.Selector)
		}
		if st := g.sandbox().Status; st.Service != testSB {
			t.Errorf("status.service = %q, want %q", st.Service, testSB)
		}
	})
}
