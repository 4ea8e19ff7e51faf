package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

type zapLevelT = zapcore.Level

// waitTimeout bounds every wait so a broken controller fails the test instead of hanging it.
const waitTimeout = 30 * time.Second

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "it-" + rand.String(8)}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// sandboxBuilder builds Sandboxes for tests, one option per concern.
type sandboxBuilder struct{ sb *agentsv1alpha1.Sandbox }

func aSandbox(ns, name string) *sandboxBuilder {
	return &sandboxBuilder{sb: &agentsv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentsv1alpha1.SandboxSpec{PodTemplate: agentsv1alpha1.PodTemplate{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    "runtime",
				Image:   "sandbox-runtime:test",
				Command: []string{"sleep", "infinity"},
				Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8888}},
			}},
		}}},
	}}
}

func (b *sandboxBuilder) withPodLabels(kv ...string) *sandboxBuilder {
	b.sb.Spec.PodTemplate.Metadata.Labels = pairs(kv)
	return b
}

func (b *sandboxBuilder) withPodAnnotations(kv ...string) *sandboxBuilder {
	b.sb.Spec.PodTemplate.Metadata.Annotations = pairs(kv)
	return b
}

func (b *sandboxBuilder) withReplicas(n int32) *sandboxBuilder {
	b.sb.Spec.Replicas = ptr.To(n)
	return b
}

func (b *sandboxBuilder) withShutdown(at time.Time, policy agentsv1alpha1.ShutdownPolicy) *sandboxBuilder {
	b.sb.Spec.ShutdownTime = &metav1.Time{Time: at}
	b.sb.Spec.ShutdownPolicy = ptr.To(policy)
	return b
}

// withHomeVolume adds a volume claim template "home" mounted at /home/agent.
func (b *sandboxBuilder) withHomeVolume() *sandboxBuilder {
	b.sb.Spec.VolumeClaimTemplates = append(b.sb.Spec.VolumeClaimTemplates, agentsv1alpha1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1alpha1.EmbeddedObjectMetadata{Name: "home", Labels: map[string]string{"purpose": "home"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
	c := &b.sb.Spec.PodTemplate.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "home", MountPath: "/home/agent"})
	return b
}

func (b *sandboxBuilder) create(t *testing.T) *agentsv1alpha1.Sandbox {
	t.Helper()
	if err := k8s.Create(context.Background(), b.sb); err != nil {
		t.Fatalf("creating sandbox %s: %v", b.sb.Name, err)
	}
	return b.sb
}

func pairs(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// eventually polls check until it returns "" (success) or the wait times out, then fails the
// test with the last thing check said was wrong.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = check(); last == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: still not true after %s: %s", what, waitTimeout, last)
}

func getSandbox(t *testing.T, ns, name string) *agentsv1alpha1.Sandbox {
	t.Helper()
	sb := &agentsv1alpha1.Sandbox{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, sb); err != nil {
		t.Fatalf("getting sandbox %s/%s: %v", ns, name, err)
	}
	return sb
}

// readyIs returns a check that the sandbox's Ready condition has the status and reason.
func readyIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) func() string {
	return func() string {
		sb := getSandbox(t, ns, name)
		c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
		if c == nil {
			return "no Ready condition"
		}
		if c.Status != status || c.Reason != reason {
			return fmt.Sprintf("Ready=%s/%s (%q), want %s/%s", c.Status, c.Reason, c.Message, status, reason)
		}
		if c.ObservedGeneration != sb.Generation {
			return fmt.Sprintf("observedGeneration %d, want %d", c.ObservedGeneration, sb.Generation)
		}
		return ""
	}
}

// exists returns a check that obj exists (want=true) or is gone (want=false).
func exists(obj client.Object, want bool) func() string {
	return func() string {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		switch {
		case err == nil && want, apierrors.IsNotFound(err) && !want:
			return ""
		case err == nil:
			return fmt.Sprintf("%T %s still exists", obj, obj.GetName())
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("%T %s does not exist", obj, obj.GetName())
		default:
			return err.Error()
		}
	}
}

func podOf(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// waitForPod waits for the sandbox's pod and returns it.
func waitForPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := podOf(ns, name)
	eventually(t, "pod "+name+" exists", exists(pod, true))
	return pod
}

// podState is what a kubelet would report, written through the pods/status subresource.
type podState struct {
	phase corev1.PodPhase
	ready bool
	ips   []string
	// unschedulable marks the pod as not schedulable by the scheduler.
	unschedulable bool
	reason        string
}

func setPodStatus(t *testing.T, pod *corev1.Pod, s podState) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatalf("getting pod: %v", err)
	}
	now := metav1.Now()
	readyStatus := corev1.ConditionFalse
	if s.ready {
		readyStatus = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{Phase: s.phase, Reason: s.reason}
	if s.unschedulable {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available", LastTransitionTime: now}}
	} else {
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: readyStatus, LastTransitionTime: now},
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "runtime", Ready: s.ready, Image: "sandbox-runtime:test"}}
	}
	for _, ip := range s.ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(s.ips) > 0 {
		pod.Status.PodIP = s.ips[0]
	}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatalf("setting pod status: %v", err)
	}
}

func running(ips ...string) podState {
	return podState{phase: corev1.PodRunning, ready: true, ips: ips}
}

func containsAll(haystack string, needles ...string) bool {
	for _, n := range needles {
		if !strings.Contains(haystack, n) {
			return false
		}
	}
	return true
}
