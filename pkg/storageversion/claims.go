// Package storageversion lets a client of v1alpha1 SandboxClaims speak v1beta1, the version the
// API server stores, on the wire: no conversion webhook call per request or watch event.
package storageversion

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
)

// Claims makes c's v1alpha1 SandboxClaims travel as v1beta1, the version the API server
// stores. Every v1alpha1 request and watch event of a claim is a call to the conversion webhook
// (an HTTPS round trip from the API server to the controller, several per claim, each on the way
// to Ready); Claims runs the functions the webhook runs (api/extensions/v1alpha1, ConvertTo and
// ConvertFrom) in the client instead, so what goes to and comes from the API server is exactly
// what a v1alpha1 request would have given. A claim is created as v1beta1 only when the
// conversion keeps nothing aside (no conversion annotation: a template's default warmpool, which
// v1beta1 names as its shadow pool); "none", or a template with a named pool, is still sent as
// v1alpha1. Reads and watches always travel as v1beta1. Updates, patches and deletes are left to
// the API server: they are not on the way to a ready sandbox. c's scheme must hold both versions.
func Claims(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			claim, ok := obj.(*extv1alpha1.SandboxClaim)
			if !ok {
				return c.Create(ctx, obj, opts...)
			}
			beta, lossless := storedForm(claim)
			if !lossless {
				return c.Create(ctx, obj, opts...)
			}
			if err := c.Create(ctx, beta, opts...); err != nil {
				return err
			}
			return servedForm(beta, claim)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			claim, ok := obj.(*extv1alpha1.SandboxClaim)
			if !ok {
				return c.Get(ctx, key, obj, opts...)
			}
			beta := &extv1beta1.SandboxClaim{}
			if err := c.Get(ctx, key, beta, opts...); err != nil {
				return err
			}
			return servedForm(beta, claim)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			claims, ok := list.(*extv1alpha1.SandboxClaimList)
			if !ok {
				return c.List(ctx, list, opts...)
			}
			beta := &extv1beta1.SandboxClaimList{}
			if err := c.List(ctx, beta, opts...); err != nil {
				return err
			}
			claims.ListMeta = beta.ListMeta
			claims.Items = make([]extv1alpha1.SandboxClaim, len(beta.Items))
			for i := range beta.Items {
				if err := servedForm(&beta.Items[i], &claims.Items[i]); err != nil {
					return err
				}
			}
			return nil
		},
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			if _, ok := list.(*extv1alpha1.SandboxClaimList); !ok {
				return c.Watch(ctx, list, opts...)
			}
			w, err := c.Watch(ctx, &extv1beta1.SandboxClaimList{}, opts...)
			if err != nil {
				return nil, err
			}
			return newServedWatch(w), nil
		},
	})
}

// storedForm is claim as the API server would store it after applying v1alpha1's defaults, and
// whether that form says everything the v1alpha1 one does.
func storedForm(claim *extv1alpha1.SandboxClaim) (*extv1beta1.SandboxClaim, bool) {
	defaulted := claim.DeepCopy()
	if defaulted.Spec.WarmPool == nil {
		// v1alpha1's schema default, which the API server applies to a v1alpha1 request.
		policy := extv1alpha1.WarmPoolPolicyDefault
		defaulted.Spec.WarmPool = &policy
	}
	beta := &extv1beta1.SandboxClaim{}
	if err := defaulted.ConvertTo(beta); err != nil {
		return nil, false
	}
	if _, kept := beta.Annotations[extv1alpha1.SandboxClaimConversionAnnotation]; kept {
		return nil, false
	}
	return beta, true
}

// servedForm fills claim with beta as the API server serves it in v1alpha1 (and as
// controller-runtime's typed client hands it on: without its TypeMeta).
func servedForm(beta *extv1beta1.SandboxClaim, claim *extv1alpha1.SandboxClaim) error {
	*claim = extv1alpha1.SandboxClaim{}
	if err := claim.ConvertFrom(beta); err != nil {
		return fmt.Errorf("converting sandboxclaim %s/%s to v1alpha1: %w", beta.Namespace, beta.Name, err)
	}
	return nil
}

// servedWatch passes a v1beta1 claim watch's events on in v1alpha1. (apimachinery's
// watch.Filter would do, but its goroutine outlives a Stop while an event waits unread.)
type servedWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func newServedWatch(in watch.Interface) *servedWatch {
	w := &servedWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go w.loop()
	return w
}

func (w *servedWatch) loop() {
	defer close(w.out)
	for ev := range w.in.ResultChan() {
		select {
		case w.out <- servedEvent(ev):
		case <-w.stop:
			return
		}
	}
}

func (w *servedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *servedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

// servedEvent turns a v1beta1 claim's watch event into the v1alpha1 one; a claim that does not
// convert becomes an error event, as a failed conversion webhook call would.
func servedEvent(ev watch.Event) watch.Event {
	beta, ok := ev.Object.(*extv1beta1.SandboxClaim)
	if !ok {
		return ev
	}
	claim := &extv1alpha1.SandboxClaim{}
	if err := servedForm(beta, claim); err != nil {
		return watch.Event{Type: watch.Error, Object: &metav1.Status{
			Status: metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonInternalError, Code: 500,
		}}
	}
	ev.Object = claim
	return ev
}
