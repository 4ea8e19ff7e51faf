package expectations

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ForgetOnDelete wraps h so that forget sees every deleted object before h queues its owner.
//
// An object created and deleted before a reconcile ran leaves its expectation standing: the
// cache never shows it, so the controller keeps trusting its own create and makes nothing until
// the expectation lapses, and nothing wakes it then. The delete event is the news that the
// object is gone; forget drops the expectation it answers.
func ForgetOnDelete(h handler.EventHandler, forget func(client.Object)) handler.EventHandler {
	return forgetOnDelete{EventHandler: h, forget: forget}
}

type forgetOnDelete struct {
	handler.EventHandler
	forget func(client.Object)
}

func (f forgetOnDelete) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.Object != nil {
		f.forget(e.Object)
	}
	f.EventHandler.Delete(ctx, e, q)
}

// Gone drops owner's expectation under key when it stands for the object with uid: that object
// was deleted. An expectation for a newer object of the same owner is kept.
func Gone[K comparable, V client.Object](s *Store[K, V], owner types.NamespacedName, uid types.UID) {
	s.Settle(owner, func(_ K, v V) bool { return v.GetUID() == uid })
}
