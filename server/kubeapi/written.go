package kubeapi

import (
	"bytes"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// recentWritesSize bounds recentWrites: about the writes of a few seconds under load.
const recentWritesSize = 8192

// recentWrites hands the watch cache's collections (a cluster's own and the cross-cluster one of the
// controllers and the scheduler) the objects this process creates and updates, so they need not decode the
// bytes they read back from the store: a write decodes the bytes it is about to store once, before storing them,
// and keeps the object under its key; a collection receiving that key with exactly those bytes takes the object
// and gives it the write's revision. Kept before the write, it is there however fast the store's notification
// brings the write back. The collections share it and never change it (their readers copy or encode).
type recentWrites struct {
	mu    sync.Mutex
	byKey map[store.Key]*pendingWrite
	ring  []*pendingWrite // insertion order; the oldest is dropped
	next  int
}

// pendingWrite is one write's bytes and their decoded object; rev is 0 until the write or a collection learns the
// revision (then the object's resourceVersion is set, once, and never changes again).
type pendingWrite struct {
	key  store.Key
	data []byte
	obj  runtime.Object
	rev  int64
}

func newRecentWrites(size int) *recentWrites {
	return &recentWrites{byKey: make(map[store.Key]*pendingWrite, size), ring: make([]*pendingWrite, size)}
}

// put keeps obj, decoded from data, as what key is about to hold; nothing else may hold obj.
func (w *recentWrites) put(key store.Key, data []byte, obj runtime.Object) *pendingWrite {
	pw := &pendingWrite{key: key, data: data, obj: obj}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.ring[w.next]; old != nil && w.byKey[old.key] == old {
		delete(w.byKey, old.key)
	}
	w.ring[w.next] = pw
	w.next = (w.next + 1) % len(w.ring)
	w.byKey[key] = pw
	return pw
}

// written gives pw the revision its write got and returns its object (shared: not to be changed).
func (w *recentWrites) written(pw *pendingWrite, rev int64) (runtime.Object, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pw.settle(rev)
}

// take is the object kept for key when its bytes are value and it is of kind gvk, at revision rev; nil
// otherwise. The kind matters where two resources share a storage (core/v1 and events.k8s.io/v1 Events): each
// one's collection decodes the same bytes into its own type.
func (w *recentWrites) take(key store.Key, rev int64, value []byte, gvk schema.GroupVersionKind) runtime.Object {
	w.mu.Lock()
	defer w.mu.Unlock()
	pw := w.byKey[key]
	if pw == nil || !bytes.Equal(pw.data, value) || pw.obj.GetObjectKind().GroupVersionKind() != gvk {
		return nil
	}
	obj, ok := pw.settle(rev)
	if !ok {
		return nil
	}
	return obj
}

// settle sets the revision (under recentWrites' lock) unless another one is set already.
func (pw *pendingWrite) settle(rev int64) (runtime.Object, bool) {
	if pw.rev == 0 {
		pw.rev = rev
		mustAccessor(pw.obj).SetResourceVersion(strconv.FormatInt(rev, 10))
	}
	return pw.obj, pw.rev == rev
}
