package fakeapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/index"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBoom = apierrors.NewInternalError(errors.New("etcd is unhappy"))

func cm(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{"v": value}}
}

// seen is what the cache shows of ConfigMap name: its value, or "absent".
func seen(t *testing.T, s *Server, name string) string {
	t.Helper()
	got := &corev1.ConfigMap{}
	err := s.Cache.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, got)
	if apierrors.IsNotFound(err) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.Data["v"]
}

// listed is how many ConfigMaps a List through the cache returns.
func listed(t *testing.T, s *Server) int {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := s.Cache.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// edit sets a's value on the API server directly, as another client would.
func edit(t *testing.T, s *Server, name, value string) {
	t.Helper()
	if err := s.API.Update(context.Background(), cm(name, value)); err != nil {
		t.Fatal(err)
	}
}

func TestCacheReads(t *testing.T) {
	tests := []struct {
		name       string
		do         func(t *testing.T, s *Server)
		wantSeen   string // the cache's value of ConfigMap a after do
		wantListed int
	}{
		{"current: the cache shows the server's edit",
			func(t *testing.T, s *Server) { edit(t, s, "a", "2") }, "2", 1},
		{"frozen: the cache keeps the picture from before the edit",
			func(t *testing.T, s *Server) { s.Freeze(&corev1.ConfigMapList{}); edit(t, s, "a", "2") }, "1", 1},
		{"frozen: an object created since is not listed",
			func(t *testing.T, s *Server) {
				s.Freeze(&corev1.ConfigMapList{})
				if err := s.API.Create(context.Background(), cm("b", "1")); err != nil {
					t.Fatal(err)
				}
			}, "1", 1},
		{"frozen another kind: ConfigMaps read through",
			func(t *testing.T, s *Server) { s.Freeze(&corev1.SecretList{}); edit(t, s, "a", "2") }, "2", 1},
		{"thawed: the cache is current again",
			func(t *testing.T, s *Server) { s.Freeze(&corev1.ConfigMapList{}); edit(t, s, "a", "2"); s.Thaw() }, "2", 1},
		{"hidden: a Get finds nothing and a List is empty",
			func(t *testing.T, s *Server) { s.Hide("ConfigMap") }, "absent", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t, WithObjects(cm("a", "1")))
			tt.do(t, s)
			if got := seen(t, s, "a"); got != tt.wantSeen {
				t.Errorf("the cache shows a = %q, want %q", got, tt.wantSeen)
			}
			if got := listed(t, s); got != tt.wantListed {
				t.Errorf("the cache lists %d ConfigMaps, want %d", got, tt.wantListed)
			}
		})
	}
}

func TestWriteLogAndFaults(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		faults     func(s *Server)
		write      func(c client.Client) error
		wantWrites []Write
		wantOnAPI  string // ConfigMap a's value on the server after the write, or "absent"
	}{
		{name: "a create is logged and reaches the server",
			write:      func(c client.Client) error { return c.Create(ctx, cm("a", "1")) },
			wantWrites: []Write{{Verb: "create", Kind: "ConfigMap", Name: "a"}}, wantOnAPI: "1"},
		{name: "a generated name is logged once created",
			write: func(c client.Client) error {
				return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "gen-"}})
			},
			wantWrites: []Write{{Verb: "create", Kind: "ConfigMap", Name: "gen-"}}, wantOnAPI: "absent"}, // "gen-" and a suffix
		{name: "an injected fault fails the write before the server",
			faults:     func(s *Server) { s.FailWrites("create", "ConfigMap", errBoom) },
			write:      func(c client.Client) error { return c.Create(ctx, cm("a", "1")) },
			wantWrites: []Write{{Verb: "create", Kind: "ConfigMap", Name: "a", Err: errBoom, Injected: true}}, wantOnAPI: "absent"},
		{name: "a fault on another verb leaves the write alone",
			faults:     func(s *Server) { s.FailWrites("delete", "ConfigMap", errBoom) },
			write:      func(c client.Client) error { return c.Create(ctx, cm("a", "1")) },
			wantWrites: []Write{{Verb: "create", Kind: "ConfigMap", Name: "a"}}, wantOnAPI: "1"},
		{name: "a lifted fault fails nothing",
			faults: func(s *Server) {
				s.FailWrites("create", "ConfigMap", errBoom)
				s.FailWrites("create", "ConfigMap", nil)
			},
			write:      func(c client.Client) error { return c.Create(ctx, cm("a", "1")) },
			wantWrites: []Write{{Verb: "create", Kind: "ConfigMap", Name: "a"}}, wantOnAPI: "1"},
		{name: "healed: every fault is lifted",
			faults:     func(s *Server) { s.FailWrites("create", "ConfigMap", errBoom); s.Heal() },
			write:      func(c client.Client) error { return c.Create(ctx, cm("a", "1")) },
			wantWrites: []Write{{Verb: "create", Kind: "ConfigMap", Name: "a"}}, wantOnAPI: "1"},
		{name: "the server's own error is logged, not injected",
			write: func(c client.Client) error { return c.Update(ctx, cm("missing", "1")) },
			wantWrites: []Write{{Verb: "update", Kind: "ConfigMap", Name: "missing",
				Err: apierrors.NewNotFound(corev1.Resource("configmaps"), "missing")}}, wantOnAPI: "absent"},
		{name: "a delete logs its propagation",
			write: func(c client.Client) error {
				if err := c.Create(ctx, cm("a", "1")); err != nil {
					return err
				}
				return c.Delete(ctx, cm("a", ""), client.PropagationPolicy(metav1.DeletePropagationBackground))
			},
			wantWrites: []Write{{Verb: "create", Kind: "ConfigMap", Name: "a"},
				{Verb: "delete", Kind: "ConfigMap", Name: "a", Propagation: "Background"}}, wantOnAPI: "absent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t)
			if tt.faults != nil {
				tt.faults(s)
			}
			_ = tt.write(s.Cache) // the error is in the log
			// The generated suffix is random; the log keeps what the server named the object.
			got := s.TakeWrites()
			for i := range got {
				if strings.HasPrefix(got[i].Name, "gen-") {
					got[i].Name = "gen-"
				}
			}
			if d := cmp.Diff(tt.wantWrites, got, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) || (a != nil && b != nil && a.Error() == b.Error()) })); d != "" {
				t.Errorf("writes (-want +got):\n%s", d)
			}
			if w := s.Writes(); len(w) != 0 {
				t.Errorf("after TakeWrites the log holds %v, want it empty", w)
			}
			if got := onAPI(t, s, "a"); got != tt.wantOnAPI {
				t.Errorf("the server holds a = %q, want %q", got, tt.wantOnAPI)
			}
		})
	}
}

func onAPI(t *testing.T, s *Server, name string) string {
	t.Helper()
	got := &corev1.ConfigMap{}
	err := s.API.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, got)
	if apierrors.IsNotFound(err) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.Data["v"]
}

func TestWriteString(t *testing.T) {
	if got, want := (Write{Verb: "status", Kind: "Sandbox", Name: "s1"}).String(), "status Sandbox/s1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// The status subresource is written apart from the object, as on a real server, and the
// write is logged under its subresource's name.
func TestStatusSubresource(t *testing.T) {
	sb := testwrap.MakeSandbox("ns", "s1").Hub()
	s := New(t, WithObjects(sb), WithStatusSubresource(&agentsv1beta1.Sandbox{}))
	sb.Spec.Replicas = new(int32)
	sb.Status.PodIPs = []string{"10.0.0.1"}
	if err := s.Cache.Status().Update(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	got := &agentsv1beta1.Sandbox{}
	if err := s.API.Get(context.Background(), client.ObjectKeyFromObject(sb), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.PodIPs) != 1 || got.Spec.Replicas != nil {
		t.Errorf("after a status write: status %v, spec.replicas %v; want the status written and the spec left", got.Status.PodIPs, got.Spec.Replicas)
	}
	if d := cmp.Diff([]string{"status Sandbox/s1"}, asStrings(s.TakeWrites())); d != "" {
		t.Errorf("writes (-want +got):\n%s", d)
	}
}

func asStrings(ws []Write) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}

// WithIndexes serves the manager's field indexes to List.
func TestIndexes(t *testing.T) {
	owned := testwrap.MakeSandbox("ns", "s1").Hub()
	s := New(t, WithObjects(owned), WithIndexes())
	list := &agentsv1beta1.SandboxList{}
	err := s.Cache.List(context.Background(), list, client.MatchingFields{index.SandboxControllerUID: "none"})
	if err != nil {
		t.Fatalf("List by the %s index: %v, want the index registered", index.SandboxControllerUID, err)
	}
}

func TestCreationStamps(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(t, WithCreationStamps(clocktesting.NewFakeClock(now)))
	if err := s.Cache.Create(context.Background(), cm("a", "1")); err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := s.API.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "a"}, got); err != nil {
		t.Fatal(err)
	}
	if !got.CreationTimestamp.Time.Equal(now) {
		t.Errorf("creationTimestamp = %v, want the clock's %v", got.CreationTimestamp, now)
	}
}

func TestDrainEvents(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	rec.Event(cm("a", ""), corev1.EventTypeNormal, "Made", "made a")
	rec.Event(cm("a", ""), corev1.EventTypeWarning, "Failed", "failed a")
	if d := cmp.Diff([]string{"Normal Made made a", "Warning Failed failed a"}, DrainEvents(rec)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if got := DrainEvents(rec); len(got) != 0 {
		t.Errorf("a second drain returned %v, want nothing", got)
	}
}
