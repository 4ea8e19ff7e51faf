package sandbox

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

type podBuilder struct{ pod *corev1.Pod }

func aPod() *podBuilder { return &podBuilder{pod: &corev1.Pod{}} }

func (b *podBuilder) phase(p corev1.PodPhase) *podBuilder { b.pod.Status.Phase = p; return b }
func (b *podBuilder) ready() *podBuilder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	return b
}
func (b *podBuilder) ip(ip string) *podBuilder {
	b.pod.Status.PodIPs = append(b.pod.Status.PodIPs, corev1.PodIP{IP: ip})
	return b
}
func (b *podBuilder) terminating() *podBuilder {
	now := metav1.Now()
	b.pod.DeletionTimestamp = &now
	return b
}

func TestReadyConditionReasons(t *testing.T) {
	running := &agentsv1beta1.Sandbox{}
	paused := &agentsv1beta1.Sandbox{Spec: agentsv1beta1.SandboxSpec{OperatingMode: agentsv1beta1.SandboxOperatingModeSuspended}}
	cases := []struct {
		name       string
		sb         *agentsv1beta1.Sandbox
		obs        observed
		err        error
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"reconcile error wins", running, observed{pod: aPod().phase(corev1.PodRunning).ready().ip("1.1.1.1").pod}, errors.New("boom"), metav1.ConditionFalse, agentsv1beta1.ReasonReconcilerError},
		{"foreign pod", running, observed{podNotOwned: true}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodNotOwned},
		{"paused, no pod", paused, observed{}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPaused},
		{"paused, pod terminating", paused, observed{pod: aPod().terminating().pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPaused},
		{"no pod yet", running, observed{}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodCreating},
		{"old pod terminating", running, observed{pod: aPod().phase(corev1.PodRunning).terminating().pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodTerminating},
		{"pending", running, observed{pod: aPod().phase(corev1.PodPending).pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodPending},
		{"no phase yet", running, observed{pod: aPod().pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodPending},
		{"running not ready", running, observed{pod: aPod().phase(corev1.PodRunning).ip("1.1.1.1").pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodNotReady},
		{"ready without IP", running, observed{pod: aPod().phase(corev1.PodRunning).ready().pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodNoIP},
		{"failed", running, observed{pod: aPod().phase(corev1.PodFailed).pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodFailed},
		{"succeeded", running, observed{pod: aPod().phase(corev1.PodSucceeded).pod}, nil, metav1.ConditionFalse, agentsv1beta1.ReasonPodSucceeded},
		{"ready", running, observed{pod: aPod().phase(corev1.PodRunning).ready().ip("1.1.1.1").pod}, nil, metav1.ConditionTrue, agentsv1beta1.ReasonReady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := readyCondition(tc.sb, tc.obs, tc.err)
			if got.Status != tc.wantStatus || got.Reason != tc.wantReason {
				t.Errorf("Ready = %s/%s (%q), want %s/%s", got.Status, got.Reason, got.Message, tc.wantStatus, tc.wantReason)
			}
			if got.Message == "" {
				t.Errorf("Ready %s has no message", got.Reason)
			}
		})
	}
}

func TestServicePortsAreUniqueAndNamed(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}}},
			{Name: "setup", Ports: []corev1.ContainerPort{{ContainerPort: 1111}}}, // runs to completion: not served
		},
		Containers: []corev1.Container{
			{Name: "a", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8888}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
			{Name: "b", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {ContainerPort: 8888}}},
		},
	}
	got := servicePorts(spec)
	want := []corev1.ServicePort{
		{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9090)},
		{Name: "http", Port: 8888, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8888)},
		{Name: "p-53-udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
		{Name: "p-8080-tcp", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("servicePorts =\n%+v\nwant\n%+v", got, want)
	}
}

func TestClaimVolumesReplaceOrAddTheNamedVolume(t *testing.T) {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}
	sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{
		{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "home"}},
		{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "cache"}},
	}
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "home", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}
	withClaimVolumes(spec, sb)
	claims := map[string]string{}
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = v.PersistentVolumeClaim.ClaimName
		} else {
			claims[v.Name] = "(not a claim)"
		}
	}
	want := map[string]string{"home": "home-s1", "cache": "cache-s1", "config": "(not a claim)"}
	if !reflect.DeepEqual(claims, want) {
		t.Errorf("volumes = %v, want %v", claims, want)
	}
}

func TestMergeTrackedRemovesOnlyKeysWePropagated(t *testing.T) {
	current := map[string]string{"old": "1", "keep": "x", "foreign": "f"}
	want := map[string]string{"keep": "y", "new": "2"}
	got := mergeTracked(current, want, []string{"old", "keep"})
	expected := map[string]string{"keep": "y", "new": "2", "foreign": "f"}
	if !reflect.DeepEqual(got, expected) {
		t.Errorf("mergeTracked = %v, want %v", got, expected)
	}
}

func TestTrackingLabelsLeaveOutANameTooLongForALabel(t *testing.T) {
	long := string(make([]byte, 250))
	if got := trackingLabels(&agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: long}}); len(got) != 1 {
		t.Errorf("a name too long for a label value must only get the hash label, got %v", got)
	}
}
