package router

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

func sandbox(ns, name string, ready metav1.ConditionStatus, reason string, ips ...string) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if ready != "" {
		sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.SandboxConditionReady, Status: ready, Reason: reason}}
	}
	sb.Status.PodIPs = ips
	return sb
}

// ready is a routable Sandbox ns/sb at 10.0.0.7, to vary.
func ready() *agentsv1beta1.Sandbox {
	return sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.7")
}

// ownedBy makes the Sandbox's owner apiVersion/kind; controller says whether it is the
// controller owner.
func ownedBy(sb *agentsv1beta1.Sandbox, apiVersion, kind string, controller bool) *agentsv1beta1.Sandbox {
	sb.OwnerReferences = append(sb.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind,
		Name: "owner", UID: "owner-uid", Controller: &controller})
	return sb
}

func hostNetwork(sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
	sb.Spec.PodTemplate.Spec.HostNetwork = true
	return sb
}

func TestSandboxCacheResolve(t *testing.T) {
	terminating := sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.7")
	terminating.DeletionTimestamp = &metav1.Time{}
	const ext = "extensions.agents.x-k8s.io/v1alpha1" // pools and claims alike
	tests := []struct {
		name          string
		sb            *agentsv1beta1.Sandbox
		allowLoopback bool
		wantAddr      string
		wantKind      error
		wantReason    string
	}{
		{"ready", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.7", "fd00::7"), false, "10.0.0.7", nil, ""},
		{"ready ipv6", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "fd00::7"), false, "fd00::7", nil, ""},
		{"ipv4-mapped ipv6 is unmapped", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "::ffff:10.0.0.7"), false, "10.0.0.7", nil, ""},
		{"no condition", sandbox("ns", "sb", "", "", "10.0.0.7"), false, "", ErrNotReady, reasonNoReadyCondition},
		{"pending", sandbox("ns", "sb", metav1.ConditionFalse, agentsv1beta1.ReasonPodPending), false, "", ErrNotReady, agentsv1beta1.ReasonPodPending},
		{"paused", sandbox("ns", "sb", metav1.ConditionFalse, agentsv1beta1.ReasonPaused, "10.0.0.7"), false, "", ErrNotReady, agentsv1beta1.ReasonPaused},
		{"unknown status", sandbox("ns", "sb", metav1.ConditionUnknown, ""), false, "", ErrNotReady, "NotReady"},
		{"ready without ip", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady), false, "", ErrNotReady, agentsv1beta1.ReasonPodNoIP},
		{"garbage ip", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "pod.example.com"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"metadata ip", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "169.254.169.254"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"unspecified ip", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "0.0.0.0"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"multicast ip", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "224.0.0.1"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"zoned ip", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "fd00::1%eth0"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"loopback refused", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "127.0.0.1"), false, "", ErrNotReady, reasonInvalidPodIP},
		{"loopback allowed", sandbox("ns", "sb", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "127.0.0.1"), true, "127.0.0.1", nil, ""},
		{"terminating", terminating, false, "", ErrNotReady, reasonTerminating},
		{"host network refused though ready", hostNetwork(ready()), false, "", ErrRefused, reasonHostNetwork},
		{"host network refused before readiness", hostNetwork(sandbox("ns", "sb", metav1.ConditionFalse, agentsv1beta1.ReasonPodPending)), false, "", ErrRefused, reasonHostNetwork},
		{"unclaimed pool member", ownedBy(ready(), ext, "SandboxWarmPool", true), false, "", ErrUnclaimed, ""},
		{"unclaimed pool member of the v1beta1 API", ownedBy(ready(), "extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool", true), false, "", ErrUnclaimed, ""},
		{"claimed member: the claim is its controller", ownedBy(ready(), ext, "SandboxClaim", true), false, "10.0.0.7", nil, ""},
		{"a pool that is an owner but not the controller", ownedBy(ready(), ext, "SandboxWarmPool", false), false, "10.0.0.7", nil, ""},
		{"a SandboxWarmPool kind of another API group", ownedBy(ready(), "example.com/v1", "SandboxWarmPool", true), false, "10.0.0.7", nil, ""},
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

// A known Sandbox's UID and declared ports come with every answer, routable or not, so that the
// proxy can check a request's port and token before it says "retry".
func TestSandboxCacheTargetFacts(t *testing.T) {
	withPorts := func(sb *agentsv1beta1.Sandbox) *agentsv1beta1.Sandbox {
		sb.UID = "uid-1"
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{
			{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 8888}, {ContainerPort: 3000, Protocol: corev1.ProtocolTCP}}},
			{Name: "b", Ports: []corev1.ContainerPort{{ContainerPort: 3000}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
		}
		sb.Spec.PodTemplate.Spec.InitContainers = []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 10250}}}}
		return sb
	}
	want := Target{UID: "uid-1", Ports: []uint16{3000, 8888}}
	tests := []struct {
		name string
		sb   *agentsv1beta1.Sandbox
	}{
		{"routable", withPorts(ready())},
		{"not ready", withPorts(sandbox("ns", "sb", metav1.ConditionFalse, agentsv1beta1.ReasonPodPending))},
		{"host network", hostNetwork(withPorts(ready()))},
		{"unclaimed pool member", ownedBy(withPorts(ready()), "extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewSandboxCache(false)
			c.OnAdd(tt.sb, true)
			got, _ := c.Resolve("ns", "sb")
			if got.UID != want.UID || !slices.Equal(got.Ports, want.Ports) {
				t.Fatalf("target %+v, want uid %s and the containers' TCP ports %v (init containers and UDP left out)", got, want.UID, want.Ports)
			}
		})
	}
}

func TestDeclaredPorts(t *testing.T) {
	port := func(p int32, proto corev1.Protocol) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: p, Protocol: proto}
	}
	tests := []struct {
		name  string
		spec  corev1.PodSpec
		wantP []uint16
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, nil},
		{"protocol unset means TCP", corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{port(8888, "")}}}}, []uint16{8888}},
		{"UDP and SCTP are not TCP", corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{port(53, corev1.ProtocolUDP), port(9, corev1.ProtocolSCTP)}}}}, nil},
		{"sorted across containers without duplicates", corev1.PodSpec{Containers: []corev1.Container{
			{Ports: []corev1.ContainerPort{port(9090, ""), port(80, "")}}, {Ports: []corev1.ContainerPort{port(80, corev1.ProtocolTCP)}}}}, []uint16{80, 9090}},
		{"init containers (sidecars too) are left out", corev1.PodSpec{
			InitContainers: []corev1.Container{{Ports: []corev1.ContainerPort{port(10250, "")}}},
			Containers:     []corev1.Container{{Ports: []corev1.ContainerPort{port(8888, "")}}}}, []uint16{8888}},
		{"out-of-range values are ignored", corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{port(0, ""), port(-1, ""), port(70000, "")}}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := declaredPorts(&tt.spec); !slices.Equal(got, tt.wantP) {
				t.Fatalf("declaredPorts = %v, want %v", got, tt.wantP)
			}
		})
	}
}

// Changed's channel closes at the next event for its Sandbox, and only for its Sandbox.
func TestSandboxCacheChanged(t *testing.T) {
	c := NewSandboxCache(false)
	c.OnAdd(ready(), true)
	ch := c.Changed("ns", "sb")
	c.OnAdd(sandbox("ns", "other", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.8"), false)
	select {
	case <-ch:
		t.Fatal("closed by an event for another Sandbox")
	default:
	}
	if again := c.Changed("ns", "sb"); again != ch {
		t.Fatal("two waiters for one Sandbox got different channels")
	}
	c.OnUpdate(ready(), ready())
	select {
	case <-ch:
	default:
		t.Fatal("not closed by an update of its Sandbox")
	}
	del := c.Changed("ns", "sb")
	c.OnDelete(ready())
	select {
	case <-del:
	default:
		t.Fatal("not closed by the deletion of its Sandbox")
	}
	if n := len(c.waiters); n != 0 {
		t.Fatalf("%d waiter channels left after their events, want none", n)
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
		{"added pending", func() { c.OnAdd(sandbox("ns", "a", metav1.ConditionFalse, agentsv1beta1.ReasonPodPending), false) }, "ns", "a", "", ErrNotReady},
		{"became ready", func() {
			c.OnUpdate(sandbox("ns", "a", metav1.ConditionFalse, agentsv1beta1.ReasonPodPending),
				sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.1"))
		}, "ns", "a", "10.0.0.1", nil},
		{"same name other namespace is separate", func() {}, "other", "a", "", ErrNotFound},
		{"pod replaced", func() {
			c.OnUpdate(sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.1"),
				sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.2"))
		}, "ns", "a", "10.0.0.2", nil},
		{"deleted", func() { c.OnDelete(sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.2")) }, "ns", "a", "", ErrNotFound},
		{"re-added", func() {
			c.OnAdd(sandbox("ns", "b", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.3"), false)
		}, "ns", "b", "10.0.0.3", nil},
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
	sb := sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.1")
	sb.Labels = map[string]string{"big": "label"}
	sb.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	sb.Status.Conditions = append(sb.Status.Conditions, metav1.Condition{Type: "Other", Status: metav1.ConditionTrue})
	sb.Spec.PodTemplate.Spec.Hostname = "h"
	sb.UID = "uid-a"
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{
		{Name: "main", Image: "big", Env: []corev1.EnvVar{{Name: "K", Value: "v"}}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8888}}},
		{Name: "side", Ports: []corev1.ContainerPort{{ContainerPort: 3000}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
	}
	sb.Spec.PodTemplate.Spec.InitContainers = []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 10250}}}}
	ownedBy(sb, "v1", "ConfigMap", false)
	ownedBy(sb, "extensions.agents.x-k8s.io/v1alpha1", "SandboxClaim", true)
	out, err := slimSandbox(sb)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*agentsv1beta1.Sandbox)
	spec := slim.Spec.PodTemplate.Spec
	if slim.Labels != nil || slim.ManagedFields != nil || spec.Hostname != "" || spec.InitContainers != nil {
		t.Fatalf("slim kept unneeded fields: %+v", slim)
	}
	if len(spec.Containers) != 1 || spec.Containers[0].Image != "" || spec.Containers[0].Env != nil {
		t.Fatalf("slim containers %+v, want one holding only the ports", spec.Containers)
	}
	if len(slim.OwnerReferences) != 1 || slim.OwnerReferences[0].Kind != "SandboxClaim" {
		t.Fatalf("slim owners %+v, want the controller alone", slim.OwnerReferences)
	}
	if len(slim.Status.Conditions) != 1 || slim.Status.PodIPs[0] != "10.0.0.1" || slim.Name != "a" || slim.Namespace != "ns" {
		t.Fatalf("slim lost routing fields: %+v", slim)
	}
	c := NewSandboxCache(false)
	c.OnAdd(slim, true)
	got, err := c.Resolve("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "uid-a" || !slices.Equal(got.Ports, []uint16{3000, 8888}) {
		t.Fatalf("resolved from the slim copy: %+v, want uid-a and ports [3000 8888]", got)
	}
	for _, keep := range []struct {
		name   string
		sb     *agentsv1beta1.Sandbox
		wantTo error
	}{
		{"host network", hostNetwork(sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.1")), ErrRefused},
		{"pool controller", ownedBy(sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.1"),
			"extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool", true), ErrUnclaimed},
	} {
		out, _ := slimSandbox(keep.sb)
		c.OnAdd(out, false)
		if _, err := c.Resolve("ns", "a"); !errors.Is(err, keep.wantTo) {
			t.Errorf("%s: resolved from the slim copy: %v, want %v", keep.name, err, keep.wantTo)
		}
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
	if got := (&ResolveError{Kind: ErrRefused, Namespace: "ns", Name: "a", Reason: reasonHostNetwork}).Error(); got != msgHostNetwork {
		t.Fatalf("host network: %q, want %q", got, msgHostNetwork)
	}
	if got := (&ResolveError{Kind: ErrUnclaimed, Namespace: "ns", Name: "a"}).Error(); got != msgUnclaimed {
		t.Fatalf("unclaimed: %q, want %q", got, msgUnclaimed)
	}
}

// The details of ns/a's refusals, as docs/router.md gives them.
const (
	msgHostNetwork = "sandbox ns/a uses the node's network (hostNetwork); the router never routes to it"
	msgUnclaimed   = "sandbox ns/a is an unclaimed warm pool member; it is routable once a SandboxClaim takes it"
)

func BenchmarkSandboxCacheResolve(b *testing.B) {
	c := NewSandboxCache(false)
	c.OnAdd(sandbox("ns", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.1"), true)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Resolve("ns", "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestSandboxCacheHasNamespace(t *testing.T) {
	c := NewSandboxCache(false)
	a := sandbox("team-a", "a", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.2")
	b := sandbox("team-a", "b", metav1.ConditionTrue, agentsv1beta1.ReasonReady, "10.0.0.3")
	steps := []struct {
		name  string
		event func()
		want  bool
	}{
		{"empty", func() {}, false},
		{"one Sandbox added", func() { c.OnAdd(a, false) }, true},
		{"the same Sandbox updated does not count twice", func() { c.OnUpdate(a, a) }, true},
		{"a second Sandbox added", func() { c.OnAdd(b, false) }, true},
		{"one of two deleted", func() { c.OnDelete(a) }, true},
		{"a delete of an unknown Sandbox changes nothing", func() { c.OnDelete(a) }, true},
		{"the last deleted", func() { c.OnDelete(b) }, false},
	}
	for _, s := range steps {
		s.event()
		if got := c.HasNamespace("team-a"); got != s.want {
			t.Fatalf("after %s: HasNamespace = %v, want %v", s.name, got, s.want)
		}
	}
}
