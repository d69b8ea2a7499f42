// Package controllers holds Wheelhouse's controllers: level-based reconcilers that serve every cluster at once
// from one process (the one holding the controller lease, see controllers/leader). They read the watch cache's
// cross-cluster collections, enqueue keys (cluster, namespace, name) in client-go work queues that own retries
// and backoff, and write through the Kubernetes API in process (kubeapi.API.LocalConfig) with their own
// identities, so validation, admission, RBAC and audit apply to them as to anyone. See
// docs/design/controllers.md.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Key names one object (or, for controllers keyed by namespace, one namespace) in one cluster.
type Key struct{ Cluster, Namespace, Name string }

func (k Key) String() string { return k.Cluster + "/" + k.Namespace + "/" + k.Name }

// Deps is what controllers use: the API (collections and in-process clients) and its registry.
type Deps struct {
	API      *kubeapi.API
	Registry *resources.Registry
	Logger   *slog.Logger
	// Clock tells the time for time-based conditions (minReadySeconds, progress deadlines, lease expiry,
	// tolerationSeconds) and schedules their re-checks; nil is the real clock. Tests pass a fake one.
	Clock clock.WithDelayedExecution
	// Events records Kubernetes Events; Run makes one when nil.
	Events *Events
	// NodeLifecycle configures the node lifecycle controller (zero: upstream's defaults).
	NodeLifecycle NodeLifecycleConfig
	// RootCA is the PEM of the CA that signs the server's own serving certificate (empty with a publicly trusted
	// certificate: clients use the system's roots), and ClusterCA (when set) returns a cluster's own CA, which
	// signs its nodes' in-cluster API endpoints (server/clusterca). Both are published into every namespace as
	// ConfigMap kube-root-ca.crt, the cluster's first.
	RootCA    []byte
	ClusterCA func(ctx context.Context, cluster string) ([]byte, error)
}

// rootCABundle is what kube-root-ca.crt holds in cluster.
func (d Deps) rootCABundle(ctx context.Context, cluster string) (string, error) {
	if d.ClusterCA == nil {
		return string(d.RootCA), nil
	}
	own, err := d.ClusterCA(ctx, cluster)
	if err != nil {
		return "", err
	}
	if len(d.RootCA) == 0 {
		return string(own), nil
	}
	return string(own) + strings.TrimLeft(string(d.RootCA), "\n"), nil
}

// recorder is the event recorder of one component in one cluster (events are dropped if Deps has no Events,
// which only a controller run on its own, outside Run, can see).
func (d Deps) recorder(cluster, component string) record.EventRecorder {
	if d.Events == nil {
		return &record.FakeRecorder{}
	}
	return d.Events.For(cluster, component)
}

func (d Deps) clock() clock.WithDelayedExecution {
	if d.Clock == nil {
		return clock.RealClock{}
	}
	return d.Clock
}

// requeueAfter is what a reconcile returns when the key needs another look once some time has passed on the
// controllers' clock (a pod becoming available after minReadySeconds, a progress deadline). It is not a failure.
type requeueAfter time.Duration

func (r requeueAfter) Error() string { return fmt.Sprintf("requeue after %s", time.Duration(r)) }

// soonest keeps the shorter of two pending re-checks (zero is none).
func soonest(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// collection is the cross-cluster collection of a resource.
func (d Deps) collection(ctx context.Context, gvr schema.GroupVersionResource) (*watchcache.Collection, error) {
	res, ok := d.Registry.Lookup(gvr)
	if !ok {
		return nil, fmt.Errorf("controllers: %v is not served", gvr)
	}
	return d.API.Collection(ctx, "", res)
}

// clients makes in-process clientsets of one identity, one per cluster, on demand.
type clients struct {
	api  *kubeapi.API
	user kubeapi.User
	mu   sync.Mutex
	by   map[string]kubernetes.Interface
}

func newClients(api *kubeapi.API, user kubeapi.User) *clients {
	return &clients{api: api, user: user, by: map[string]kubernetes.Interface{}}
}

func (c *clients) For(cluster string) (kubernetes.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.by[cluster]; ok {
		return cs, nil
	}
	cs, err := kubernetes.NewForConfig(c.api.LocalConfig(cluster, c.user))
	if err != nil {
		return nil, err
	}
	c.by[cluster] = cs
	return cs, nil
}

// serviceAccountUser is the identity of a built-in controller: the service account kube-system/<name> that the
// built-in ClusterRoleBinding system:controller:<name> binds to its role.
func serviceAccountUser(name string) kubeapi.User {
	return kubeapi.User{Name: "system:serviceaccount:kube-system:" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
}

// follow calls handle for every object of a collection (the initial state as ADDED events) and every later
// event, until ctx ends. When the collection resets (the cache lost its store watch) it starts over from a
// fresh collection: the handler sees the state again, which is what level-based controllers need.
func follow(ctx context.Context, get func(context.Context) (*watchcache.Collection, error), handle func(watchcache.Event), log *slog.Logger) {
	Follow(ctx, get, FollowHandlers{Event: handle}, log)
}

// FollowHandlers receive a followed collection: Reset (optional) before each delivery of the whole state (the
// first, and again whenever the collection starts over), Event for every object of that state (as ADDED) and
// every change after it, Synced (optional) once each whole state has been delivered. A follower keeping its own
// copy drops, at Synced, what it had before Reset and did not see again.
type FollowHandlers struct {
	Reset, Synced func()
	Event         func(watchcache.Event)
}

// Follow is follow with all its handlers, for other packages (the scheduler).
func Follow(ctx context.Context, get func(context.Context) (*watchcache.Collection, error), h FollowHandlers, log *slog.Logger) {
	handle := h.Event
	for ctx.Err() == nil {
		col, err := get(ctx)
		if err != nil {
			log.Warn("controller cannot read a collection; retrying", "err", err)
			if !pause(ctx, time.Second) {
				return
			}
			continue
		}
		w, err := col.Watch(ctx, watchcache.WatchOptions{Initial: true})
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("controller cannot watch a collection; retrying", "err", err)
			}
			if !pause(ctx, time.Second) {
				return
			}
			continue
		}
		if h.Reset != nil {
			h.Reset()
		}
		for _, e := range w.Initial {
			handle(watchcache.Event{Type: store.Added, Revision: e.Revision, Object: e})
		}
		if h.Synced != nil {
			h.Synced()
		}
		var spare []watchcache.Event
		for {
			evs, err := w.Next(ctx, spare)
			if err != nil {
				w.Stop()
				if ctx.Err() == nil && !errors.Is(err, watchcache.ErrClosed) {
					log.Info("controller watch ended; starting over", "err", err)
				}
				break
			}
			for i, ev := range evs {
				if ev.Object != nil {
					handle(ev)
				}
				evs[i] = watchcache.Event{}
			}
			spare = evs
		}
	}
}

func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// newQueue is a rate-limited work queue of keys (per-key exponential backoff 5 ms → 1000 s, as upstream's
// controllers use).
func newQueue(name string) workqueue.TypedRateLimitingInterface[Key] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[Key](),
		workqueue.TypedRateLimitingQueueConfig[Key]{Name: name})
}

// work runs reconcile for queued keys on n workers until ctx ends; a failed key is retried with backoff, and a
// key whose reconcile returned requeueAfter is queued again when that much time has passed on clk.
func work(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key], n int, clk clock.WithDelayedExecution, reconcile func(context.Context, Key) error, log *slog.Logger) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				k, shutdown := q.Get()
				if shutdown {
					return
				}
				var later requeueAfter
				if err := reconcile(ctx, k); errors.As(err, &later) {
					q.Forget(k)
					clk.AfterFunc(time.Duration(later), func() { q.Add(k) })
				} else if err != nil && ctx.Err() == nil {
					log.Debug("reconcile failed; retrying with backoff", "key", k.String(), "err", err)
					q.AddRateLimited(k)
				} else {
					q.Forget(k)
				}
				q.Done(k)
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}
