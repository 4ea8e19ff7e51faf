package expectations

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func podWithUID(uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: uid}}
}

func TestGoneDropsOnlyTheExpectationOfTheDeletedObject(t *testing.T) {
	tests := []struct {
		name      string
		expected  types.UID // the object the store stands in for
		deleted   types.UID
		wantFound bool
	}{
		{name: "the expected object deleted", expected: "uid-1", deleted: "uid-1", wantFound: false},
		{name: "an older object of the owner deleted", expected: "uid-2", deleted: "uid-1", wantFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New[string, *corev1.Pod](clocktesting.NewFakeClock(start), ttl)
			s.Expect(poolA, "sandbox-uid", podWithUID(tt.expected))
			Gone(s, poolA, tt.deleted)
			if _, ok := s.Get(poolA, "sandbox-uid"); ok != tt.wantFound {
				t.Errorf("after %s was deleted the expectation for %s is found: %v, want %v", tt.deleted, tt.expected, ok, tt.wantFound)
			}
		})
	}
}

func TestForgetOnDeleteRunsBeforeTheOwnerIsQueuedAndOnlyOnDeletes(t *testing.T) {
	var forgotten, seen []string
	inner := handler.Funcs{
		CreateFunc: func(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			seen = append(seen, "create")
		},
		UpdateFunc: func(context.Context, event.UpdateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			seen = append(seen, "update")
		},
		DeleteFunc: func(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			seen = append(seen, "delete after forgetting "+strings.Join(forgotten, "+"))
		},
	}
	h := ForgetOnDelete(inner, func(o client.Object) { forgotten = append(forgotten, string(o.GetUID())) })

	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: podWithUID("c")}, nil)
	h.Update(ctx, event.UpdateEvent{ObjectOld: podWithUID("u"), ObjectNew: podWithUID("u")}, nil)
	h.Delete(ctx, event.DeleteEvent{Object: podWithUID("d")}, nil)

	want := []string{"create", "update", "delete after forgetting d"}
	if !slices.Equal(seen, want) {
		t.Errorf("events reached the inner handler as %q, want %q (forget only for the delete, before it is queued)", seen, want)
	}
}
