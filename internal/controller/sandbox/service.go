package sandbox

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// reconcileService keeps the headless Service that gives the sandbox a stable DNS name. It
// returns the owned Service, or nil and the reason there is none.
func (r *Reconciler) reconcileService(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Service, string, error) {
	if errs := validation.IsDNS1035Label(sb.Name); len(errs) > 0 {
		return nil, fmt.Sprintf("no Service: the sandbox name is not a valid Service name (%s)", strings.Join(errs, "; ")), nil
	}
	desired := buildService(sb)
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	current := &corev1.Service{}
	err := r.client.Get(ctx, key, current)
	if err == nil {
		r.createdServices.Observed(key, sb.UID)
	} else if mine, ok := r.createdServices.Get(key, sb.UID); ok && apierrors.IsNotFound(err) {
		// Created moments ago, not in the cache yet.
		current, err = mine.DeepCopy(), nil
	}
	if apierrors.IsNotFound(err) {
		if err := controllerutil.SetControllerReference(sb, desired, r.client.Scheme()); err != nil {
			return nil, "", err
		}
		err = r.client.Create(ctx, desired, agentsv1beta1.FieldOwner)
		if err == nil {
			log.FromContext(ctx).V(2).Info("created the Service", "service", klog.KObj(desired))
			r.createdServices.Expect(key, sb.UID, desired.DeepCopy())
			return desired, "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, "", err
		}
		// The cache holds only tracked Services; read the one in the way directly.
		err = r.apiReader.Get(ctx, key, current)
	}
	if err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(current, sb) {
		return nil, fmt.Sprintf("no Service: a Service named %q exists and is not owned by this sandbox", sb.Name), nil
	}
	if equality.Semantic.DeepEqual(current.Spec.Selector, desired.Spec.Selector) &&
		equality.Semantic.DeepEqual(current.Spec.Ports, desired.Spec.Ports) {
		return current, "", nil
	}
	updated := current.DeepCopy()
	updated.Spec.Selector = desired.Spec.Selector
	updated.Spec.Ports = desired.Spec.Ports
	if err := r.client.Patch(ctx, updated, client.MergeFrom(current), agentsv1beta1.FieldOwner); err != nil {
		return nil, "", client.IgnoreNotFound(err)
	}
	return updated, "", nil
}

func buildService(sb *agentsv1beta1.Sandbox) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      sb.Name,
			Namespace: sb.Namespace,
			Labels:    trackingLabels(sb),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{agentsv1beta1.SandboxNameHashLabel: agentsv1beta1.NameHash(sb.Name)},
			Ports:     servicePorts(&sb.Spec.PodTemplate.Spec),
		},
	}
}

// servicePorts exposes every declared container port (sidecars included), one entry per
// port/protocol pair, each with a unique name as a multi-port Service requires.
func servicePorts(spec *corev1.PodSpec) []corev1.ServicePort {
	var containers []corev1.Container
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	containers = append(containers, spec.Containers...)

	type key struct {
		port     int32
		protocol corev1.Protocol
	}
	seen := map[key]bool{}
	names := map[string]bool{}
	var ports []corev1.ServicePort
	for _, c := range containers {
		for _, p := range c.Ports {
			protocol := p.Protocol
			if protocol == "" {
				protocol = corev1.ProtocolTCP
			}
			k := key{p.ContainerPort, protocol}
			if seen[k] {
				continue
			}
			seen[k] = true
			name := p.Name
			if name == "" || names[name] {
				name = fmt.Sprintf("p-%d-%s", p.ContainerPort, strings.ToLower(string(protocol)))
			}
			names[name] = true
			// TargetPort as the API server would default it, so drift checks compare like with like.
			ports = append(ports, corev1.ServicePort{Name: name, Port: p.ContainerPort, Protocol: protocol, TargetPort: intstr.FromInt32(p.ContainerPort)})
		}
	}
	return ports
}
