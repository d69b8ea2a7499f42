package kubeapi

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// recentWritesSize bounds recentWrites: about the writes of a few seconds under load.
const recentWritesSize = 8192

// recentWrites keeps the objects this process created or updated lately, decoded, by (key, revision): the
// watch cache's collections (a cluster's own and the cross-cluster one of the controllers and the scheduler)
// take them instead of decoding the same bytes again when the store's watch brings the write back. Each was
// decoded once from exactly the bytes stored at that revision (decodeResult), so it is the object a decode
// would give; the collections share it and never change it (their readers copy or encode). Deletes are not kept.
// A collection that sees a write before its writer kept it (the store's notification won the race) decodes it
// itself, as before.
type recentWrites struct {
	mu   sync.Mutex
	objs map[writeKey]runtime.Object
	ring []writeKey // insertion order; the oldest is overwritten
	next int
}

type writeKey struct {
	store.Key
	rev int64
}

func newRecentWrites(size int) *recentWrites {
	return &recentWrites{objs: make(map[writeKey]runtime.Object, size), ring: make([]writeKey, size)}
}

// put keeps obj as the decoded state of key at rev; obj must not change afterwards.
func (w *recentWrites) put(key store.Key, rev int64, obj runtime.Object) {
	k := writeKey{key, rev}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.ring[w.next]; old.rev != 0 {
		delete(w.objs, old)
	}
	w.ring[w.next] = k
	w.next = (w.next + 1) % len(w.ring)
	w.objs[k] = obj
}

// get is the object kept for key at rev, or nil.
func (w *recentWrites) get(key store.Key, rev int64) runtime.Object {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.objs[writeKey{key, rev}]
}
