package sandbox

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// reconcilePVCs creates the missing claims of spec.volumeClaimTemplates. Existing claims are
// never changed: a PVC spec is mostly immutable and its data is the point of keeping it.
func (r *Reconciler) reconcilePVCs(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	for i := range sb.Spec.VolumeClaimTemplates {
		vct := &sb.Spec.VolumeClaimTemplates[i]
		name := PVCName(vct.Name, sb.Name)
		existing := &corev1.PersistentVolumeClaim{}
		err := r.client.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: name}, existing)
		if err == nil {
			if owner := metav1.GetControllerOf(existing); owner != nil && owner.UID != sb.UID {
				return fmt.Errorf("PersistentVolumeClaim %s is controlled by %s %s", name, owner.Kind, owner.Name)
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		pvc := buildPVC(sb, vct)
		if err := controllerutil.SetControllerReference(sb, pvc, r.client.Scheme()); err != nil {
			return err
		}
		if err := r.client.Create(ctx, pvc, agentsv1beta1.FieldOwner); ignoreAlreadyExists(err) != nil {
			return err
		}
		log.FromContext(ctx).V(2).Info("created a PersistentVolumeClaim", "pvc", klog.KObj(pvc))
	}
	return nil
}

func buildPVC(sb *agentsv1beta1.Sandbox, vct *agentsv1beta1.PersistentVolumeClaimTemplate) *corev1.PersistentVolumeClaim {
	labels := map[string]string{}
	for k, v := range vct.Labels {
		labels[k] = v
	}
	for k, v := range trackingLabels(sb) {
		labels[k] = v
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PVCName(vct.Name, sb.Name),
			Namespace:   sb.Namespace,
			Labels:      labels,
			Annotations: copyMap(vct.Annotations),
		},
		Spec: *vct.Spec.DeepCopy(),
	}
}

// withClaimVolumes points every pod volume named like a volume claim template at the sandbox's
// PVC, adding the volume when the pod spec only mounts it (StatefulSet semantics).
func withClaimVolumes(spec *corev1.PodSpec, sb *agentsv1beta1.Sandbox) {
	for i := range sb.Spec.VolumeClaimTemplates {
		vct := &sb.Spec.VolumeClaimTemplates[i]
		source := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: PVCName(vct.Name, sb.Name),
		}}
		replaced := false
		for j := range spec.Volumes {
			if spec.Volumes[j].Name == vct.Name {
				spec.Volumes[j].VolumeSource = source
				replaced = true
			}
		}
		if !replaced {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: vct.Name, VolumeSource: source})
		}
	}
}

func copyMap(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
