package controllers

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// goneClusters serves apitest's clusters until one is marked gone, and counts the requests for gone ones.
type goneClusters struct {
	mu       sync.Mutex // guards gone
	gone     map[string]bool
	requests atomic.Int64 // requests for a gone cluster
}

func (g *goneClusters) Cluster(_ context.Context, id string) (kubeapi.Cluster, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone[id] {
		g.requests.Add(1)
		return kubeapi.Cluster{}, kubeapi.ErrClusterNotFound
	}
	return kubeapi.Cluster{ID: id, ServiceCIDR: "10.96.0.0/12", PodCIDR: "10.244.0.0/16"}, nil
}

// A key whose object the controllers' cache still holds but the API answers NotFound for (its cluster deleted
// while the cache is late) is retried with back-off, not at once: before, the root CA publisher requeued it
// immediately, forever — a hot loop on the shared control plane (issue 34, item 3).
func TestRootCAPublisherBacksOffOnNotFound(t *testing.T) {
	db := pgtest.NewDatabase(t)
	clusters := &goneClusters{gone: map[string]bool{}}
	api, reg := apitest.NewOn(t, db, func(c *kubeapi.Config) { c.Clusters = clusters })
	d := Deps{API: api, Registry: reg, Logger: slog.New(slog.DiscardHandler), RootCA: []byte("root\n")}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); RunRootCAPublisher(ctx, d) }()
	defer func() { cancel(); <-done }()
	eventually(t, "kube-root-ca.crt in c2", func() bool {
		_, err := admin(t, d, "c2").CoreV1().ConfigMaps("default").Get(t.Context(), rootCAConfigMap, metav1.GetOptions{})
		return err == nil
	})

	clusters.mu.Lock()
	clusters.gone["c2"] = true
	clusters.mu.Unlock()
	// A change the controller must undo, written behind the API's back (the store's own events feed the cache),
	// so the controller sees a ConfigMap to update in a cluster the API no longer serves.
	st, err := store.Open(t.Context(), store.Config{URL: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := store.Key{Cluster: "c2", Resource: "configmaps", Namespace: "default", Name: rootCAConfigMap}
	cur, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(cur.Value, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"ca.crt": "tampered"}
	b, err := json.Marshal(&cm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), key, b, cur.Revision); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller trying to put the ConfigMap back", func() bool { return clusters.requests.Load() > 0 })
	// The observation window: with the queue's back-off (5 ms doubling) a second holds about eight attempts;
	// the immediate requeue made one per round trip, hundreds a second.
	time.Sleep(time.Second)
	if n := clusters.requests.Load(); n > 30 {
		t.Errorf("%d requests for the deleted cluster within a second: the key is retried without back-off", n)
	}
}
