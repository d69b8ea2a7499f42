package kubeapi

import (
	"bytes"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// sharedEvents decodes, and encodes per media type, each watched object version once for every watcher in this
// process: watchers of one resource receive the same store events, so the first watcher that needs an object
// (or its encoding) does the work and the others reuse it. Shared objects are never modified after they are
// stored. The set is bounded (a ring of the most recent versions); a version that fell out is decoded again.
type sharedEvents struct {
	mu    sync.Mutex // guards items, ring and next
	items map[shareKey]*sharedObject
	ring  []shareKey
	next  int
}

// shareKey names one version of one object as one served kind (events are served as two kinds).
type shareKey struct {
	gvk schema.GroupVersionKind
	key store.Key
	rev int64
}

// sharedObject is a decoded object version and its encodings.
type sharedObject struct {
	obj runtime.Object // read-only
	mu  sync.Mutex     // guards enc
	enc map[string][]byte
}

func newSharedEvents(size int) *sharedEvents {
	return &sharedEvents{items: make(map[shareKey]*sharedObject, size), ring: make([]shareKey, size)}
}

// object returns the decoded version so of res, decoding it if no watcher has yet.
func (s *sharedEvents) object(res *resources.Resource, so store.Object) (*sharedObject, error) {
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
	o = &sharedObject{obj: obj, enc: map[string][]byte{}}
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

// encoded returns the object encoded by enc, which mediaType names; the bytes are shared and must not be changed.
func (o *sharedObject) encoded(mediaType string, enc runtime.Encoder) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b, ok := o.enc[mediaType]; ok {
		return b, nil
	}
	var buf bytes.Buffer
	if err := enc.Encode(o.obj, &buf); err != nil {
		return nil, err
	}
	o.enc[mediaType] = buf.Bytes()
	return buf.Bytes(), nil
}
