package watchcache

import (
	"bytes"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Entry is one decoded object version. Entries are shared by every reader and watcher: Object must never be
// modified (copy it first).
type Entry struct {
	Cluster         string
	Namespace, Name string
	// Revision is the version's resourceVersion (for a DELETED event: the delete's revision).
	Revision       int64
	CreateRevision int64
	Object         runtime.Object

	mu  sync.Mutex // guards enc
	enc map[string][]byte
}

// NewEntry wraps a decoded object version (for readers that decode outside a collection).
func NewEntry(so store.Object, obj runtime.Object) *Entry { return newEntry(so, obj) }

func newEntry(so store.Object, obj runtime.Object) *Entry {
	return &Entry{Cluster: so.Cluster, Namespace: so.Namespace, Name: so.Name, Revision: so.Revision,
		CreateRevision: so.CreateRevision, Object: obj}
}

// Encoded is Object encoded by enc, which mediaType names. The first caller for a media type encodes; later ones
// (every other watcher sending the same event) reuse the bytes, which must not be modified.
func (e *Entry) Encoded(mediaType string, enc runtime.Encoder) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.enc[mediaType]; ok {
		return b, nil
	}
	var buf bytes.Buffer
	if err := enc.Encode(e.Object, &buf); err != nil {
		return nil, err
	}
	if e.enc == nil {
		e.enc = map[string][]byte{}
	}
	e.enc[mediaType] = buf.Bytes()
	return buf.Bytes(), nil
}

// Event is one change of a collection, or a bookmark.
type Event struct {
	Type     store.EventType
	Revision int64
	// Object is the new state (ADDED, MODIFIED) or the last state (DELETED); nil for a BOOKMARK.
	Object *Entry
	// Prev is the state the event replaced (nil for ADDED and BOOKMARK): with it a watcher with a selector
	// tells an object entering or leaving the selector from a plain change, without remembering anything.
	Prev *Entry
}
