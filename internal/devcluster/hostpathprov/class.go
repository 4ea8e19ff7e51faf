package hostpathprov

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DeleteForeignClass deletes the StorageClass name when another provisioner serves it, so that
// applying ours recreates it: a class's provisioner cannot be changed in place. It returns the
// provisioner of the class it deleted, "" when there was none to delete. Volumes already
// provisioned keep working; their PVs do not depend on the class object.
func DeleteForeignClass(ctx context.Context, cs kubernetes.Interface, name string) (string, error) {
	sc, err := cs.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if sc.Provisioner == Name {
		return "", nil
	}
	// The UID precondition leaves alone a class someone recreated meanwhile.
	err = cs.StorageV1().StorageClasses().Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(sc.UID))})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting StorageClass %s (provisioner %s): %w", name, sc.Provisioner, err)
	}
	return sc.Provisioner, nil
}
