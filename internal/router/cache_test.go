package router

import (
	"errors"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

func sandbox(ns, name string, ready metav1.ConditionStatus, reason string, ips ...string) *v1alpha1.Sandbox {
	sb := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if ready != "" {
		sb.Status.Conditions = []metav1.Condition{{Type: v1alpha1.SandboxConditionReady, Status: ready, Reason: reason}}
	}
	sb.Status.PodIPs = ips
	return sb
}

func TestSandboxCacheResolve(t *testing.T) {
	terminating := sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.7")
	terminating.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name          string
		sb            *v1alpha1.Sandbox
		allowLoopback bool
		wantAddr      string
		wantKind      error
		wantReason    string
	}{
		{"ready", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.7", "fd00::7"), false, "10.0.0.7", nil, ""},
		{"ready ipv6", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "fd00::7"), false, "fd00::7", nil, ""},
		{"ipv4-mapped ipv6 is unmapped", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "::ffff:10.0.0.7"), false, "10.0.0.7", nil, ""},
		{"no condition", sandbox("ns", "sb", "", "", "10.0.0.7"), false, "", ErrNotReady, reasonNoReadyCondition},
		{"pending", sandbox("ns", "sb", metav1.ConditionFalse, v1alpha1.ReasonPodPending), false, "", ErrNotReady, v1alpha1.ReasonPodPending},
		{"paused", sandbox("ns", "sb", metav1.ConditionFalse, v1alpha1.ReasonPaused, "10.0.0.7"), false, "", ErrNotReady, v1alpha1.ReasonPaused},
		{"unknown status", sandbox("ns", "sb", metav1.ConditionUnknown, ""), false, "", ErrNotReady, "NotReady"},
		{"ready without ip", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady), false, "", ErrNotReady, v1alpha1.ReasonPodNoIP},
		{"garbage ip", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "pod.example.com"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"metadata ip", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "169.254.169.254"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"unspecified ip", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "0.0.0.0"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"multicast ip", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "224.0.0.1"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"zoned ip", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "fd00::1%eth0"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"loopback refused", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "127.0.0.1"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"loopback allowed", sandbox("ns", "sb", metav1.ConditionTrue, v1alpha1.ReasonReady, "127.0.0.1"), true, "127.0.0.1", nil, ""},
		{"terminating", terminating, false, "", ErrNotReady, reasonTerminating},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewSandboxCache(tt.allowLoopback)
			c.OnAdd(tt.sb, true)
			got, err := c.Resolve("ns", "sb")
			if tt.wantKind == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got.Addr != netip.MustParseAddr(tt.wantAddr) {
					t.Fatalf("addr = %v, want %v", got.Addr, tt.wantAddr)
				}
				return
			}
			var re *ResolveError
			if !errors.Is(err, tt.wantKind) || !errors.As(err, &re) || re.Reason != tt.wantReason {
				t.Fatalf("err = %#v, want kind %v reason %q", err, tt.wantKind, tt.wantReason)
			}
		})
	}
}

func TestSandboxCacheEvents(t *testing.T) {
	c := NewSandboxCache(false)
	resolve := func(ns, name string) (string, error) {
		tgt, err := c.Resolve(ns, name)
		if err != nil {
			return "", err
		}
		return tgt.Addr.String(), nil
	}
	steps := []struct {
		name     string
		do       func()
		ns, sb   string
		wantAddr string
		wantErr  error
	}{
		{"unknown", func() {}, "ns", "a", "", ErrNotFound},
		{"added pending", func() { c.OnAdd(sandbox("ns", "a", metav1.ConditionFalse, v1alpha1.ReasonPodPending), false) }, "ns", "a", "", ErrNotReady},
		{"became ready", func() {
			c.OnUpdate(sandbox("ns", "a", metav1.ConditionFalse, v1alpha1.ReasonPodPending),
				sandbox("ns", "a", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.1"))
		}, "ns", "a", "10.0.0.1", nil},
		{"same name other namespace is separate", func() {}, "other", "a", "", ErrNotFound},
		{"pod replaced", func() {
			c.OnUpdate(sandbox("ns", "a", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.1"),
				sandbox("ns", "a", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.2"))
		}, "ns", "a", "10.0.0.2", nil},
		{"deleted", func() { c.OnDelete(sandbox("ns", "a", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.2")) }, "ns", "a", "", ErrNotFound},
		{"re-added", func() { c.OnAdd(sandbox("ns", "b", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.3"), false) }, "ns", "b", "10.0.0.3", nil},
		{"tombstone delete", func() {
			c.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: sandbox("ns", "b", "", "")})
		}, "ns", "b", "", ErrNotFound},
		{"foreign objects ignored", func() { c.OnAdd("not a sandbox", false); c.OnDelete(42) }, "ns", "b", "", ErrNotFound},
	}
	for _, s := range steps {
		s.do()
		got, err := resolve(s.ns, s.sb)
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Fatalf("%s: err = %v, want %v", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil || got != s.wantAddr {
			t.Fatalf("%s: got %q, %v; want %q", s.name, got, err, s.wantAddr)
		}
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("Len = %d after deleting everything", n)
	}
}

func TestSandboxCacheUnsynced(t *testing.T) {
	c := NewSandboxCache(false)
	synced := false
	f := func() bool { return synced }
	c.synced.Store(&f)
	var re *ResolveError
	if _, err := c.Resolve("ns", "x"); !errors.Is(err, ErrNotReady) || !errors.As(err, &re) || re.Reason != reasonCacheSyncing {
		t.Fatalf("before sync: err = %v, want not ready (syncing)", err)
	}
	synced = true
	if _, err := c.Resolve("ns", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after sync: err = %v, want not found", err)
	}
}

func TestSlimSandbox(t *testing.T) {
	sb := sandbox("ns", "a", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.1")
	sb.Labels = map[string]string{"big": "label"}
	sb.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	sb.Status.Conditions = append(sb.Status.Conditions, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue})
	sb.Spec.PodTemplate.Spec.Hostname = "h"
	out, err := slimSandbox(sb)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*v1alpha1.Sandbox)
	if slim.Labels != nil || slim.ManagedFields != nil || slim.Spec.PodTemplate.Spec.Hostname != "" {
		t.Fatalf("slim kept unneeded fields: %+v", slim)
	}
	if len(slim.Status.Conditions) != 1 || slim.Status.PodIPs[0] != "10.0.0.1" || slim.Name != "a" || slim.Namespace != "ns" {
		t.Fatalf("slim lost routing fields: %+v", slim)
	}
	c := NewSandboxCache(false)
	c.OnAdd(slim, true)
	if _, err := c.Resolve("ns", "a"); err != nil {
		t.Fatal(err)
	}
	if o, _ := slimSandbox("x"); o != "x" {
		t.Fatal("non-Sandbox objects must pass through")
	}
}

func TestResolveErrorMessages(t *testing.T) {
	if got := (&ResolveError{Kind: ErrNotFound, Namespace: "ns", Name: "a"}).Error(); got != "sandbox ns/a not found" {
		t.Fatal(got)
	}
	if got := (&ResolveError{Kind: ErrNotReady, Namespace: "ns", Name: "a", Reason: "PodPending"}).Error(); got != "sandbox ns/a is not ready (PodPending)" {
		t.Fatal(got)
	}
}

func BenchmarkSandboxCacheResolve(b *testing.B) {
	c := NewSandboxCache(false)
	c.OnAdd(sandbox("ns", "a", metav1.ConditionTrue, v1alpha1.ReasonReady, "10.0.0.1"), true)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Resolve("ns", "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
