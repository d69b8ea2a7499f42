package dns

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Handler returns the informer event handler that keeps the Index in step with a Service informer and an
// EndpointSlice informer (register it with both). Deletes whose final state was missed
// (cache.DeletedFinalStateUnknown) are applied too; objects of other types are ignored.
func (x *Index) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    x.upsert,
		UpdateFunc: func(_, obj any) { x.upsert(obj) },
		DeleteFunc: x.delete,
	}
}

func (x *Index) upsert(obj any) {
	switch o := obj.(type) {
	case *corev1.Service:
		x.UpsertService(o)
	case *discoveryv1.EndpointSlice:
		x.UpsertEndpointSlice(o)
	}
}

func (x *Index) delete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *corev1.Service:
		x.DeleteService(o.Namespace, o.Name)
	case *discoveryv1.EndpointSlice:
		x.DeleteEndpointSlice(o.Namespace, o.Name)
	}
}
