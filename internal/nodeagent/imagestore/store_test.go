package imagestore

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

const uid = "0e0e0e0e-1111-2222-3333-444444444444"

// saved is a store holding one complete image of uid, saved from pod ns/pod.
func saved(t *testing.T) Store {
	t.Helper()
	s := Store{Dir: t.TempDir()}
	dir, err := s.Prepare(Owner{SandboxUID: uid, Namespace: "ns", PodName: "pod", PodUID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"checkpoint.img": "kernel", "pages.img": "0123456789", "pages_meta.img": "m"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Seal(uid, time.Now()); err != nil || n != 17 {
		t.Fatalf("Seal = %d, %v; want 17 bytes", n, err)
	}
	return s
}

func TestOnlyAnImageFolderOfTheStoreResolves(t *testing.T) {
	s := Store{Dir: "/var/lib/images"}
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/var/lib/images/" + uid, true},
		{"/var/lib/images/" + uid + "/", false},
		{"/var/lib/images/../images/" + uid, false},
		{"/var/lib/images/x/" + uid, false},
		{"/etc/" + uid, false},
		{"var/lib/images/" + uid, false},
		{"/var/lib/images/not-a-uid", false},
		{"/var/lib/images/0E0E0E0E-1111-2222-3333-444444444444", false},
		{"/var/lib/images", false},
	} {
		got, err := s.Resolve(tc.path)
		if tc.ok != (err == nil) || (tc.ok && got != uid) {
			t.Errorf("Resolve(%q) = %q, %v; want ok %t", tc.path, got, err, tc.ok)
		}
		if err != nil && ReasonOf(err) != ReasonBadPath {
			t.Errorf("Resolve(%q) failed with reason %q; want %s", tc.path, ReasonOf(err), ReasonBadPath)
		}
	}
}

func TestVerifyRefusesWhatIsNotThePodsCompleteImage(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spoil      func(s Store)
		ns, pod    string
		wantReason string
	}{
		{name: "the pod's own image", ns: "ns", pod: "pod"},
		{name: "another namespace's pod of the same name", ns: "other", pod: "pod", wantReason: ReasonNotOwner},
		{name: "another pod of the namespace", ns: "ns", pod: "other", wantReason: ReasonNotOwner},
		{name: "pages cut short", ns: "ns", pod: "pod", wantReason: ReasonCorrupt,
			spoil: func(s Store) { _ = os.Truncate(filepath.Join(s.Path(uid), "pages.img"), 5) }},
		{name: "a file gone", ns: "ns", pod: "pod", wantReason: ReasonCorrupt,
			spoil: func(s Store) { _ = os.Remove(filepath.Join(s.Path(uid), "pages_meta.img")) }},
		{name: "the image deleted", ns: "ns", pod: "pod", wantReason: ReasonNoImage,
			spoil: func(s Store) { _ = s.Delete(uid) }},
		{name: "owner.json unreadable", ns: "ns", pod: "pod", wantReason: ReasonCorrupt,
			spoil: func(s Store) { _ = os.WriteFile(filepath.Join(s.Path(uid), ownerFile), []byte("{"), 0o600) }},
		{name: "never sealed (the checkpoint did not finish)", ns: "ns", pod: "pod", wantReason: ReasonCorrupt,
			spoil: func(s Store) {
				_, _ = s.Prepare(Owner{SandboxUID: uid, Namespace: "ns", PodName: "pod"})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := saved(t)
			if tc.spoil != nil {
				tc.spoil(s)
			}
			_, err := s.Verify(s.Path(uid), tc.ns, tc.pod)
			if got := reasonOrEmpty(err); got != tc.wantReason {
				t.Errorf("Verify for %s/%s = %v; want reason %q", tc.ns, tc.pod, err, tc.wantReason)
			}
		})
	}
}

func reasonOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return ReasonOf(err)
}

func TestSealWithoutAKernelImageIsCorrupt(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if _, err := s.Prepare(Owner{SandboxUID: uid, Namespace: "ns", PodName: "pod"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(uid, time.Now()); ReasonOf(err) != ReasonCorrupt {
		t.Errorf("Seal of an empty image = %v; want reason %s", err, ReasonCorrupt)
	}
}

func TestAFullDiskHasItsReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "write", Path: "/x", Err: errNoSpace()}, true},
		{errString("checkpoint: write pages.img: no space left on device"), true},
		{errString("disk quota exceeded"), true},
		{errString("permission denied"), false},
	} {
		if got := IsNoSpace(tc.err); got != tc.want {
			t.Errorf("IsNoSpace(%v) = %t; want %t", tc.err, got, tc.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
