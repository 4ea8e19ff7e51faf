// Package kwoknode builds the Node objects of simulated (kwok) nodes, shared by the local
// cluster and the benchmark control plane.
package kwoknode

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Annotation marks the nodes kwok manages (--manage-nodes-with-annotation-selector).
	Annotation = "kwok.x-k8s.io/node"
	// Taint keeps real workloads off simulated nodes.
	Taint = "kwok.x-k8s.io/node"
)

// Toleration lets a pod run on the simulated nodes.
var Toleration = corev1.Toleration{Key: Taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// New returns a simulated node that fits maxPods pods.
func New(name string, maxPods int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse(strconv.Itoa(maxPods)),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{Annotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok"},
		},
		Spec: corev1.NodeSpec{Taints: Taints()},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Phase: corev1.NodeRunning,
		},
	}
}

// Taints are the taints a simulated node keeps.
func Taints() []corev1.Taint {
	return []corev1.Taint{{Key: Taint, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}
}
