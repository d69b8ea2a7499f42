package watchcache

import (
	"bytes"
	"io"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// countingEncoder is a JSON encoder counting its calls.
type countingEncoder struct {
	kruntime.Encoder
	n int
}

func (c *countingEncoder) Encode(obj kruntime.Object, w io.Writer) error {
	c.n++
	return c.Encoder.Encode(obj, w)
}

// TestEncodedSharedWhileHeld: the watchers sending one event share its encoding while any of them holds it;
// once none does, the entry does not keep it alive, and a later sender gets the same bytes, encoded again if
// the garbage collector took them.
func TestEncodedSharedWhileHeld(t *testing.T) {
	enc := &countingEncoder{Encoder: json.NewSerializerWithOptions(json.DefaultMetaFactory, nil, nil, json.SerializerOptions{})}
	e := newEntry(store.Object{Key: store.Key{Name: "cm"}, Revision: 7},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}})
	first, err := e.Encoded("application/json", enc)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.Encoded("application/json", enc)
	if err != nil {
		t.Fatal(err)
	}
	if enc.n != 1 || &first[0] != &second[0] {
		t.Fatalf("two senders while the first holds the bytes: %d encodes, shared %v", enc.n, &first[0] == &second[0])
	}
	want := string(first)
	runtime.KeepAlive(first)
	runtime.KeepAlive(second)
	first, second = nil, nil
	runtime.GC()
	runtime.GC()
	again, err := e.Encoded("application/json", enc)
	if err != nil || !bytes.Equal(again, []byte(want)) {
		t.Fatalf("after the senders let go: %q %v, want %q", again, err, want)
	}
	if enc.n != 2 {
		t.Errorf("%d encodes after a collection, want 2: the entry kept bytes nobody held", enc.n)
	}
}
