package controllers

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// Events records Kubernetes Events for the controllers and the scheduler with client-go's own recorder, so
// they deduplicate and aggregate as kube-controller-manager's do (one Event per object, reason and message,
// its count, firstTimestamp and lastTimestamp advanced by patches; similar events of one object folded into
// "(combined from similar events)"; a per-object spam filter). One broadcaster per cluster, made on first use,
// writes through that cluster's API as system:kube-controller-manager: a correlator never mixes two clusters'
// objects, and the events go through RBAC and validation like anyone's.
type Events struct {
	d   Deps
	mu  sync.Mutex
	by  map[string]record.EventBroadcaster
	rec map[[2]string]record.EventRecorder
	cl  *clients
}

// NewEvents makes the recorder set; Close stops its broadcasters.
func NewEvents(d Deps) *Events {
	return &Events{d: d, by: map[string]record.EventBroadcaster{}, rec: map[[2]string]record.EventRecorder{},
		cl: newClients(d.API, controllerManagerUser)}
}

var controllerManagerUser = kubeapi.User{Name: "system:kube-controller-manager", Groups: []string{"system:authenticated"}}

// For is the recorder of one component (the event's source, such as "deployment-controller") in one cluster.
func (e *Events) For(cluster, component string) record.EventRecorder {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.rec[[2]string{cluster, component}]; ok {
		return r
	}
	b, ok := e.by[cluster]
	if !ok {
		cs, err := e.cl.For(cluster)
		if err != nil {
			// An in-process client cannot fail to build from LocalConfig; if it ever does, events are lost, not
			// the controller's work.
			e.d.Logger.Warn("cannot record events", "cluster", cluster, "err", err)
			return &record.FakeRecorder{}
		}
		b = record.NewBroadcaster(record.WithContext(context.Background()))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		e.by[cluster] = b
	}
	r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
	e.rec[[2]string{cluster, component}] = r
	return r
}

// Close stops every broadcaster (after flushing what is queued).
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.by {
		b.Shutdown()
	}
	e.by = map[string]record.EventBroadcaster{}
	e.rec = map[[2]string]record.EventRecorder{}
}
