package kubeapi

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// sharedEvents decodes, and encodes per media type, each object version once for every watcher the store feeds
// directly (watches the watch cache cannot serve: from before its window, or with the cache disabled): such
// watchers of one resource receive the same store events, so the first watcher that needs an object (or its
// encoding) does the work and the others reuse it. Shared entries are never modified after they are stored.
// The set is bounded (a ring of the most recent versions); a version that fell out is decoded again.
type sharedEvents struct {
	mu    sync.Mutex // guards items, ring and next
	items map[shareKey]*watchcache.Entry
	ring  []shareKey
	next  int
}

// shareKey names one version of one object as one served kind (events are served as two kinds).
type shareKey struct {
	gvk schema.GroupVersionKind
	key store.Key
	rev int64
}

func newSharedEvents(size int) *sharedEvents {
	return &sharedEvents{items: make(map[shareKey]*watchcache.Entry, size), ring: make([]shareKey, size)}
}

// object returns the decoded version so of res, decoding it if no watcher has yet.
func (s *sharedEvents) object(res *resources.Resource, so store.Object) (*watchcache.Entry, error) {
	k := shareKey{gvk: res.GVK, key: so.Key, rev: so.Revision}
	s.mu.Lock()
	o, ok := s.items[k]
	s.mu.Unlock()
	if ok {
		return o, nil
	}
	obj, err := decodeStored(res, so)
	if err != nil {
		return nil, err
	}
	o = watchcache.NewEntry(so, obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.items[k]; ok {
		return prev, nil // another watcher decoded it meanwhile
	}
	if old := s.ring[s.next]; old != (shareKey{}) {
		delete(s.items, old)
	}
	s.ring[s.next] = k
	s.next = (s.next + 1) % len(s.ring)
	s.items[k] = o
	return o, nil
}
