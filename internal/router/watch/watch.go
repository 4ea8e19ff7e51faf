// Package watch builds the router's informers: one kind, cluster-wide or of one namespace, each
// object cut down by a transform to the few fields the router reads, so that a watch of every
// Sandbox or every pod of a cluster stays small. The Sandbox cache (routing) and the pod cache
// (naming a tokenless caller by its source address) are both fed this way.
package watch

import (
	"context"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Attach makes an informer cache over obj's kind (all namespaces when namespace is ""), keeping
// only what transform leaves of each object, and registers handler on it. It returns the cache,
// which the caller runs with Start, and whether the handler has seen the initial list.
func Attach(ctx context.Context, cfg *rest.Config, namespace string, obj client.Object,
	addToScheme func(*runtime.Scheme) error, transform toolscache.TransformFunc,
	handler toolscache.ResourceEventHandler) (crcache.Cache, func() bool, error) {
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, nil, err
	}
	opts := crcache.Options{Scheme: scheme, ByObject: map[client.Object]crcache.ByObject{obj: {Transform: transform}}}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]crcache.Config{namespace: {}}
	}
	kind := reflect.TypeOf(obj).Elem().Name()
	informers, err := crcache.New(cfg, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s cache: %w", kind, err)
	}
	inf, err := informers.GetInformer(ctx, obj)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s informer: %w", kind, err)
	}
	reg, err := inf.AddEventHandler(handler)
	if err != nil {
		return nil, nil, fmt.Errorf("registering %s event handler: %w", kind, err)
	}
	return informers, reg.HasSynced, nil
}

// DeletedKey names the object of a delete event: the object itself, or the tombstone of a delete
// the watch missed.
func DeletedKey(obj any) (namespace, name string, ok bool) {
	switch o := obj.(type) {
	case toolscache.DeletedFinalStateUnknown:
		ns, n, err := toolscache.SplitMetaNamespaceKey(o.Key)
		return ns, n, err == nil
	case metav1.Object:
		return o.GetNamespace(), o.GetName(), true
	}
	return "", "", false
}
