package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/hostpathprov"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// storageClass is a non-default class (other tests' claims must not land in it) of provisioner.
func storageClass(name, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

func createClass(t *testing.T, cs kubernetes.Interface, sc *storagev1.StorageClass) {
	t.Helper()
	if _, err := cs.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
}

// provisionerKubeconfig is a kubeconfig with exactly the rights the dev cluster grants the
// provisioner: the built-in system:persistent-volume-provisioner role.
func provisionerKubeconfig(t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	user := "hostpath-provisioner-" + ns
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:persistent-volume-provisioner"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	path, err := env.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startProvisioner runs `devcluster hostpath-provisioner` as its own process, as the dev cluster
// does (in this process, the library's constructor would write client-go's global scheme while
// other goroutines read it), and stops it with SIGTERM at cleanup, expecting a clean exit.
func startProvisioner(t *testing.T, kubeconfig, root string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devcluster")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin,
		"github.com/agent-sandbox/agent-sandbox/cmd/devcluster").CombinedOutput(); err != nil {
		t.Fatalf("building devcluster: %v\n%s", err, out)
	}
	var logs testwrap.SyncBuffer
	cmd := exec.Command(bin, "hostpath-provisioner", "--kubeconfig", kubeconfig, "--root", root)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("the provisioner ended with %v; its log:\n%s", err, logs.String())
		}
	})
}

// A claim of a class of agent-sandbox.dev/hostpath binds to a PV whose directory any uid can
// write; deleting the claim deletes the PV and the directory.
func TestHostPathProvisionerServesAClaimAndCleansUp(t *testing.T) {
	ns := newNamespace(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	class := "hostpath-" + ns
	createClass(t, cs, storageClass(class, hostpathprov.Name))

	root := t.TempDir()
	startProvisioner(t, provisionerKubeconfig(t, cs, ns), root)

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "home", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(t.Context(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pvName string
	testwrap.EventuallyContext(t, "the claim is Bound", func(ctx context.Context) error {
		got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim phase %q, volume %q", got.Status.Phase, got.Spec.VolumeName)
		}
		pvName = got.Spec.VolumeName
		return nil
	})
	pv, err := cs.CoreV1().PersistentVolumes().Get(t.Context(), pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, pvName)
	if hp := pv.Spec.HostPath; hp == nil || hp.Path != dir || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("PV hostPath = %+v, want path %s of type Directory", hp, dir)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Mi")) != 0 {
		t.Errorf("PV capacity = %s, want the claim's 1Mi", got.String())
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode() != os.ModeDir|0o777 {
		t.Fatalf("volume directory %s: %v %v, want drwxrwxrwx", dir, fi, err)
	}

	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(t.Context(), pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwrap.EventuallyContext(t, "the PV is deleted", func(ctx context.Context) error {
		got, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("PV %s still there, phase %q", pvName, got.Status.Phase)
	})
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume directory %s after its PV went: %v, want it gone", dir, err)
	}
}

// `up` on a cluster whose default class was kube-controller-manager's deletes it so that ours
// can be applied (a class's provisioner is immutable); a class already ours stays.
func TestDeleteForeignClassReplacesOnlyAnotherProvisionersClass(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(env.Config)
	tests := []struct {
		name        string
		provisioner string // of the existing class; "" for none
		wantDeleted string
	}{
		{"kube-controller-manager's class", "kubernetes.io/host-path", "kubernetes.io/host-path"},
		{"our class", hostpathprov.Name, ""},
		{"no class", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "standard-" + newNamespace(t)
			if tc.provisioner != "" {
				createClass(t, cs, storageClass(name, tc.provisioner))
			}
			deleted, err := hostpathprov.DeleteForeignClass(t.Context(), cs, name)
			if err != nil || deleted != tc.wantDeleted {
				t.Fatalf("DeleteForeignClass = %q, %v; want %q, no error", deleted, err, tc.wantDeleted)
			}
			_, err = cs.StorageV1().StorageClasses().Get(t.Context(), name, metav1.GetOptions{})
			if exists := err == nil; exists != (tc.provisioner != "" && tc.wantDeleted == "") {
				t.Errorf("class %s exists = %v (%v) after DeleteForeignClass", name, exists, err)
			}
		})
	}
}
