package sandboxclaim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/fakeapi"
)

func TestTemplateOf(t *testing.T) {
	python := testwrap.MakeTemplate("ns", "python").Hub()
	pool := testwrap.MakeWarmPool("ns", "fast").Template("python").Hub()
	orphanPool := testwrap.MakeWarmPool("ns", "orphan").Template("gone").Hub()
	cases := []struct {
		name       string
		claim      *extv1beta1.SandboxClaim
		want       string // the template's name
		wantReason string // of the user error instead
		wantMsg    string
	}{
		{"the template the claim names", testwrap.MakeClaim("ns", "c").Template("python").Hub(), "python", "", ""},
		{"the named template, whatever pool the claim names", testwrap.MakeClaim("ns", "c").Template("python").WarmPool("orphan").Hub(), "python", "", ""},
		{"a missing template", testwrap.MakeClaim("ns", "c").Template("later").Hub(), "",
			extv1beta1.ReasonTemplateNotFound, `SandboxTemplate "later" not found; the claim proceeds once it exists`},
		{"a v1beta1 claim: its pool's template", testwrap.MakeClaim("ns", "c").WarmPool("fast").Hub(), "python", "", ""},
		{"a v1beta1 claim whose pool is missing", testwrap.MakeClaim("ns", "c").WarmPool("late-pool").Hub(), "",
			extv1beta1.ReasonWarmPoolNotFound, `SandboxWarmPool "late-pool" not found`},
		{"a v1beta1 claim whose pool's template is missing", testwrap.MakeClaim("ns", "c").WarmPool("orphan").Hub(), "",
			extv1beta1.ReasonTemplateNotFound, `SandboxTemplate "gone" not found`},
		{"neither a template nor a pool (none)", testwrap.MakeClaim("ns", "c").WarmPool("none").Hub(), "",
			extv1beta1.ReasonTemplateNotFound, "names neither a SandboxTemplate"},
		{"neither a template nor a pool (default)", testwrap.MakeClaim("ns", "c").Hub(), "",
			extv1beta1.ReasonTemplateNotFound, "names neither a SandboxTemplate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := New(fakeapi.New(t, fakeapi.WithObjects(python, pool, orphanPool), fakeapi.WithIndexes()).API, nil, Options{})
			got, err := r.templateOf(context.Background(), tc.claim)
			if tc.wantReason != "" {
				var ue *userError
				if !errors.As(err, &ue) || ue.reason != tc.wantReason || !strings.Contains(ue.message, tc.wantMsg) {
					t.Fatalf("err = %v, want a %s user error containing %q", err, tc.wantReason, tc.wantMsg)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("templateOf = %v, %v; want template %s", got, err, tc.want)
			}
		})
	}
}

func TestTemplateOfPassesOnOtherErrors(t *testing.T) {
	// A scheme without the extension types: every read fails, and not with NotFound.
	r := New(fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithTypeConverters(managedfields.NewDeducedTypeConverter()).Build(), nil, Options{})
	_, err := r.templateOf(context.Background(), testwrap.MakeClaim("ns", "c").Template("python").Hub())
	var ue *userError
	if err == nil || errors.As(err, &ue) {
		t.Fatalf("err = %v, want the client's error, not a user error (it is retried)", err)
	}
}

func TestPoolCreatedPassesOnlyCreations(t *testing.T) {
	pool := testwrap.MakeWarmPool("ns", "fast").Hub()
	cases := []struct {
		name string
		pass bool
		got  bool
	}{
		{"create", true, poolCreated.Create(event.CreateEvent{Object: pool})},
		{"update", false, poolCreated.Update(event.UpdateEvent{ObjectOld: pool, ObjectNew: pool})},
		{"delete", false, poolCreated.Delete(event.DeleteEvent{Object: pool})},
		{"generic", false, poolCreated.Generic(event.GenericEvent{Object: pool})},
	}
	for _, tc := range cases {
		if tc.got != tc.pass {
			t.Errorf("%s event passes = %v, want %v", tc.name, tc.got, tc.pass)
		}
	}
}
