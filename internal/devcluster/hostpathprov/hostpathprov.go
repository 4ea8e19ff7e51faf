// Package hostpathprov is the dev cluster's dynamic PersistentVolume provisioner: each volume is
// a directory <root>/<pv name> on this machine, mounted as a hostPath volume. Unlike
// kube-controller-manager's built-in hostpath provisioner (root-owned 0750 directories), it makes
// the directory world-writable (0777), as Rancher's local-path-provisioner does, because a
// non-root sandbox cannot otherwise write its own volume and fsGroup does not apply to hostPath.
// For a one-node development cluster only.
package hostpathprov

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const (
	// Name is the provisioner StorageClasses name to have their claims served here.
	Name = "agent-sandbox.dev/hostpath"
	// DefaultRoot is where the volumes' directories live (the path kube-controller-manager's
	// hostpath provisioner used, which the rest of devcluster cleans up).
	DefaultRoot = "/tmp/hostpath_pv"
)

// volumeMode is every volume directory's mode: writable by whatever uid a pod runs as.
const volumeMode fs.FileMode = 0o777

// Provisioner makes and removes the volume directories under Root.
type Provisioner struct {
	Root string
}

var _ controller.Provisioner = (*Provisioner)(nil)

// Provision creates <root>/<pv name> with mode 0777 (an existing directory is reused) and
// returns its PersistentVolume: the claim's capacity and access modes, the class's reclaim
// policy.
func (p *Provisioner) Provision(_ context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	name := opts.PVName
	if !isEntryName(name) {
		return nil, controller.ProvisioningFinished, fmt.Errorf("volume name %q is not a single path element", name)
	}
	if err := os.MkdirAll(p.Root, 0o755); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	root, err := os.OpenRoot(p.Root)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	defer root.Close()
	if err := makeVolumeDir(root, name); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if opts.StorageClass != nil && opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	dirType := corev1.HostPathDirectory
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: opts.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   opts.PVC.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(p.Root, name), Type: &dirType},
			},
		},
	}, controller.ProvisioningFinished, nil
}

// makeVolumeDir creates the directory and sets its mode after the fact: Mkdir's mode is
// filtered by the process's umask. Anything but a directory in its place is an error.
func makeVolumeDir(root *os.Root, name string) error {
	if err := root.Mkdir(name, volumeMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory (%s)", filepath.Join(root.Name(), name), fi.Mode().Type())
	}
	return root.Chmod(name, volumeMode)
}

// Delete removes the PV's directory, which must be directly under Root; a directory already
// gone is fine. The removal cannot leave Root: os.Root refuses to follow a symlink out of it,
// and a symlink in the volume's place is removed, not followed.
func (p *Provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return fmt.Errorf("PersistentVolume %s is not a hostPath volume", pv.Name)
	}
	path := pv.Spec.HostPath.Path
	name := filepath.Base(path)
	if !filepath.IsAbs(path) || filepath.Clean(path) != filepath.Join(filepath.Clean(p.Root), name) || !isEntryName(name) {
		return fmt.Errorf("PersistentVolume %s: path %q is not directly under %s, refusing to delete it", pv.Name, path, p.Root)
	}
	root, err := os.OpenRoot(p.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(name)
}

// isEntryName is true for a name that is one entry of a directory (not ".", "..", nor a path).
func isEntryName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name && filepath.IsLocal(name)
}
