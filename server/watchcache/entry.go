package watchcache

import (
	"bytes"
	"sync"
	"unsafe"
	"weak"

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
	enc map[string]weakBytes
}

// weakBytes is an encoding held only as long as a sender still uses it: a weak pointer to the bytes' backing
// array and their length.
type weakBytes struct {
	p weak.Pointer[byte]
	n int
}

// NewEntry wraps a decoded object version (for readers that decode outside a collection).
func NewEntry(so store.Object, obj runtime.Object) *Entry { return newEntry(so, obj) }

func newEntry(so store.Object, obj runtime.Object) *Entry {
	return &Entry{Cluster: so.Cluster, Namespace: so.Namespace, Name: so.Name, Revision: so.Revision,
		CreateRevision: so.CreateRevision, Object: obj}
}

// Encoded is Object encoded by enc, which mediaType names. The first caller for a media type encodes; later ones
// (every other watcher sending the same event at about the same time) reuse the bytes, which must not be
// modified. The entry keeps them only weakly: once no sender holds them the garbage collector takes them back,
// and a later caller encodes again. Kept for good, the encodings of the objects a collection holds were a fifth of
// the server's heap with 12,000 pods, for the watchers of one event, which send it within moments of each other.
func (e *Entry) Encoded(mediaType string, enc runtime.Encoder) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w, ok := e.enc[mediaType]; ok {
		if p := w.p.Value(); p != nil {
			return unsafe.Slice(p, w.n), nil
		}
	}
	var buf bytes.Buffer
	if err := enc.Encode(e.Object, &buf); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if len(b) == 0 {
		return b, nil
	}
	if e.enc == nil {
		e.enc = map[string]weakBytes{}
	}
	e.enc[mediaType] = weakBytes{p: weak.Make(&b[0]), n: len(b)}
	return b, nil
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
