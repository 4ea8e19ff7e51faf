package hostpathprov

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// claim is a PVC asking for size with the given access modes.
func claim(size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "home", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// class is a StorageClass of this provisioner; reclaim nil leaves the policy unset.
func class(reclaim *corev1.PersistentVolumeReclaimPolicy) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: Name, ReclaimPolicy: reclaim}
}

func options(pvName string) controller.ProvisionOptions {
	return controller.ProvisionOptions{PVName: pvName, PVC: claim("1Gi", corev1.ReadWriteOnce), StorageClass: class(nil)}
}

// hostPathPV is a PV whose hostPath is path.
func hostPathPV(path string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: path}}},
	}
}

// withUmask sets the process's umask for the rest of the test (the tests do not run in
// parallel).
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return fi.Mode()
}

func TestProvisionMakesAWorldWritableDirectory(t *testing.T) {
	tests := []struct {
		name  string
		umask int
		// setup prepares root (an empty directory).
		setup func(t *testing.T, root string)
		// keeps is a file under root that must survive.
		keeps string
	}{
		{name: "new volume, umask 022", umask: 0o022},
		{name: "new volume, umask 077", umask: 0o077},
		{name: "root missing: created", umask: 0o022, setup: func(t *testing.T, root string) {
			if err := os.Remove(root); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "existing private directory: reused, made 0777", umask: 0o022, setup: func(t *testing.T, root string) {
			if err := os.Mkdir(filepath.Join(root, "pvc-1"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "pvc-1", "kept"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, keeps: "pvc-1/kept"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			withUmask(t, tc.umask)
			root := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, root)
			}
			p := &Provisioner{Root: root}
			if _, state, err := p.Provision(t.Context(), options("pvc-1")); err != nil || state != controller.ProvisioningFinished {
				t.Fatalf("Provision = %s, %v; want Finished, no error", state, err)
			}
			dir := filepath.Join(root, "pvc-1")
			if got := mode(t, dir); got != os.ModeDir|0o777 {
				t.Errorf("volume directory mode = %v, want drwxrwxrwx", got)
			}
			if tc.keeps != "" {
				if _, err := os.Stat(filepath.Join(root, tc.keeps)); err != nil {
					t.Errorf("the existing directory lost its content: %v", err)
				}
			}
		})
	}
}

func TestProvisionRefusesWhatIsNotItsOwnDirectory(t *testing.T) {
	tests := []struct {
		name   string
		pvName string
		setup  func(t *testing.T, root, outside string)
	}{
		{name: "a file in the volume's place", pvName: "pvc-1", setup: func(t *testing.T, root, _ string) {
			if err := os.WriteFile(filepath.Join(root, "pvc-1"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a symlink in the volume's place", pvName: "pvc-1", setup: func(t *testing.T, root, outside string) {
			if err := os.Symlink(outside, filepath.Join(root, "pvc-1")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a nested name", pvName: "a/b"},
		{name: "a parent name", pvName: ".."},
		{name: "an empty name", pvName: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			if err := os.Chmod(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, root, outside)
			}
			pv, _, err := (&Provisioner{Root: root}).Provision(t.Context(), options(tc.pvName))
			if err == nil {
				t.Fatalf("Provision(%q) = %v, want an error", tc.pvName, pv)
			}
			if got := mode(t, outside); got != os.ModeDir|0o700 {
				t.Errorf("a directory outside root changed mode to %v", got)
			}
			if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
				t.Errorf("a refused name left a directory behind: %v", err)
			}
		})
	}
}

func TestProvisionedVolumeServesTheClaim(t *testing.T) {
	root := "/srv/volumes"
	dirType := corev1.HostPathDirectory
	tests := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		class *storagev1.StorageClass
		want  corev1.PersistentVolumeSpec
	}{
		{
			name:  "the claim's size and access mode, the class's Delete",
			claim: claim("1Gi", corev1.ReadWriteOnce),
			class: class(ptr.To(corev1.PersistentVolumeReclaimDelete)),
			want: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: root + "/pvc-1", Type: &dirType}},
			},
		},
		{
			name:  "several access modes, the class's Retain",
			claim: claim("5Mi", corev1.ReadWriteOnce, corev1.ReadOnlyMany),
			class: class(ptr.To(corev1.PersistentVolumeReclaimRetain)),
			want: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Mi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: root + "/pvc-1", Type: &dirType}},
			},
		},
		{
			name:  "a class without a reclaim policy: Delete, the API's default",
			claim: claim("1Gi", corev1.ReadWriteOncePod),
			class: class(nil),
			want: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: root + "/pvc-1", Type: &dirType}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			p := &Provisioner{Root: tmp}
			pv, _, err := p.Provision(t.Context(), controller.ProvisionOptions{PVName: "pvc-1", PVC: tc.claim, StorageClass: tc.class})
			if err != nil {
				t.Fatal(err)
			}
			if pv.Name != "pvc-1" {
				t.Errorf("PV name = %q, want the name the controller chose, pvc-1", pv.Name)
			}
			// The path is the temp root's; compare the rest against the fixed root.
			if pv.Spec.HostPath != nil {
				pv.Spec.HostPath.Path = root + "/" + filepath.Base(pv.Spec.HostPath.Path)
				if dir := filepath.Join(tmp, "pvc-1"); !isDir(dir) {
					t.Errorf("the PV's directory %s does not exist", dir)
				}
			}
			if diff := cmp.Diff(tc.want, pv.Spec); diff != "" {
				t.Errorf("PV spec (-want +got):\n%s", diff)
			}
		})
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func TestDeleteRemovesTheVolumeDirectory(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares root and returns the PV's path.
		setup func(t *testing.T, root string) string
	}{
		{name: "a directory with content", setup: func(t *testing.T, root string) string {
			dir := filepath.Join(root, "pvc-1")
			if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o400); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{name: "already gone", setup: func(t *testing.T, root string) string { return filepath.Join(root, "pvc-1") }},
		{name: "root gone", setup: func(t *testing.T, root string) string {
			if err := os.Remove(root); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "pvc-1")
		}},
		{name: "an unclean path that still names an entry of root", setup: func(t *testing.T, root string) string {
			if err := os.Mkdir(filepath.Join(root, "pvc-1"), 0o777); err != nil {
				t.Fatal(err)
			}
			return root + "/./pvc-1/"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			path := tc.setup(t, root)
			p := &Provisioner{Root: root}
			for i := range 2 { // the second call finds it gone
				if err := p.Delete(t.Context(), hostPathPV(path)); err != nil {
					t.Fatalf("Delete #%d: %v", i+1, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(root, "pvc-1")); !os.IsNotExist(err) {
				t.Errorf("the volume directory is still there: %v", err)
			}
		})
	}
}

func TestDeleteRefusesAPathNotDirectlyUnderRoot(t *testing.T) {
	tests := []struct {
		name string
		// path is the PV's path, given root and a directory outside it that must survive.
		path func(root, outside string) string
	}{
		{"a directory outside root", func(_, outside string) string { return outside }},
		{"root itself", func(root, _ string) string { return root }},
		{"a directory nested under root", func(root, _ string) string { return filepath.Join(root, "pvc-1", "keep") }},
		{"a dot-dot escape", func(root, outside string) string { return root + "/../" + filepath.Base(outside) }},
		{"a relative path", func(_, _ string) string { return "pvc-1" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			root, outside := filepath.Join(parent, "root"), filepath.Join(parent, "outside")
			for _, d := range []string{filepath.Join(root, "pvc-1", "keep"), filepath.Join(outside, "keep")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			path := tc.path(root, outside)
			if err := (&Provisioner{Root: root}).Delete(t.Context(), hostPathPV(path)); err == nil {
				t.Errorf("Delete(%q) succeeded, want a refusal", path)
			}
			for _, d := range []string{filepath.Join(root, "pvc-1", "keep"), filepath.Join(outside, "keep")} {
				if _, err := os.Stat(d); err != nil {
					t.Errorf("after the refused Delete of %q: %v", path, err)
				}
			}
		})
	}
}

func TestDeleteRefusesAVolumeThatIsNotHostPath(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}}}
	if err := (&Provisioner{Root: t.TempDir()}).Delete(t.Context(), pv); err == nil {
		t.Error("Delete of an NFS volume succeeded, want an error")
	}
}

// A symlink in a volume's place (say, made by a pod in another volume) is removed, never
// followed out of root.
func TestDeleteRemovesASymlinkNotItsTarget(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "precious"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "pvc-1")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if err := (&Provisioner{Root: root}).Delete(t.Context(), hostPathPV(link)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the symlink is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "precious")); err != nil {
		t.Errorf("the symlink's target lost its content: %v", err)
	}
}
