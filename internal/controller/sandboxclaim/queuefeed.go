package sandboxclaim

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/warmqueue"
)

// warmQueueFeeder keeps the warm queue equal to the set of adoptable Sandboxes as watch events
// arrive. It enqueues no reconcile of its own.
func warmQueueFeeder(q *warmqueue.Queue) handler.EventHandler {
	type rq = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ rq) { feed(q, e.Object) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ rq) { feed(q, e.ObjectNew) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ rq) { q.Remove(client.ObjectKeyFromObject(e.Object)) },
	}
}

func feed(q *warmqueue.Queue, o client.Object) {
	sb, ok := o.(*agentsv1beta1.Sandbox)
	if !ok {
		return
	}
	if !adoptable(sb) {
		q.Remove(client.ObjectKeyFromObject(sb))
		return
	}
	q.Offer(warmqueue.Candidate{
		Name:         client.ObjectKeyFromObject(sb),
		Pool:         metav1.GetControllerOf(sb).Name,
		Template:     sb.Annotations[extv1beta1.TemplateRefAnnotation],
		TemplateHash: sb.Labels[extv1beta1.TemplateHashLabel],
	})
}
