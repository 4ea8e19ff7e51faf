package access

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access/accesstest"
)

// The pod cache follows pods through their life: an IP names a pod only while it runs, and
// again once a second claimant is gone.
func TestPodCacheFollowsPods(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.1")
	c := NewPodCache(false)
	steps := []struct {
		name    string
		apply   func()
		wantPod string // "" : anonymous
	}{
		{"pending pod", func() { c.OnAdd(accesstest.Pod("a", "p", "sa", "Pending", false), true) }, ""},
		{"pod runs", func() { c.OnUpdate(nil, accesstest.Pod("a", "p", "sa", "Running", false, "10.0.0.1")) }, "a/p"},
		{"second pod claims the IP", func() { c.OnAdd(accesstest.Pod("b", "q", "sa", "Running", false, "10.0.0.1"), false) }, ""},
		{"first pod deleted", func() { c.OnDelete(accesstest.Pod("a", "p", "sa", "Running", false, "10.0.0.1")) }, "b/q"},
		{"second pod terminating", func() {
			c.OnUpdate(nil, accesstest.Terminating(accesstest.Pod("b", "q", "sa", "Running", false, "10.0.0.1")))
		}, ""},
		{"second pod back (update without deletion)", func() { c.OnUpdate(nil, accesstest.Pod("b", "q", "sa", "Running", false, "10.0.0.1")) }, "b/q"},
		{"second pod gone, tombstone", func() { c.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "b/q"}) }, ""},
	}
	for _, s := range steps {
		s.apply()
		id, err := c.Identify(ip)
		got := ""
		if err == nil {
			got = id.Pod
		}
		if got != s.wantPod {
			t.Fatalf("after %q: 10.0.0.1 names %q, want %q", s.name, got, s.wantPod)
		}
	}
	if c.Len() != 0 {
		t.Fatalf("%d pods left after every delete", c.Len())
	}
}

func TestPodCacheLoopbackOnlyWhenAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		c := NewPodCache(allow)
		c.OnAdd(accesstest.Pod("a", "p", "sa", "Running", false, "127.0.0.1"), true)
		if _, err := c.Identify(netip.MustParseAddr("127.0.0.1")); (err == nil) != allow {
			t.Errorf("allowLoopback=%v: loopback names a pod: %v", allow, err)
		}
	}
}

func TestSlimPodKeepsOnlyIdentification(t *testing.T) {
	now := metav1.Now()
	p := accesstest.Pod("a", "p", "sa", "Running", true, "10.0.0.1")
	p.DeletionTimestamp = &now
	p.Labels = map[string]string{"x": "y"}
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady}}
	obj, err := slimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	s := obj.(*corev1.Pod)
	if s.Labels != nil || s.Spec.Containers != nil || s.Status.Conditions != nil {
		t.Fatalf("slim pod kept more than it needs: %+v", s)
	}
	if s.Namespace != "a" || s.Name != "p" || s.Spec.ServiceAccountName != "sa" || !s.Spec.HostNetwork ||
		s.Status.Phase != corev1.PodRunning || s.DeletionTimestamp == nil || s.Status.PodIPs[0].IP != "10.0.0.1" {
		t.Fatalf("slim pod lost a field identification reads: %+v", s)
	}
}
