package kubeapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

func TestSharedEventsDecodeOnceAndStayBounded(t *testing.T) {
	reg := resources.Default()
	res, _ := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	cm := &corev1.ConfigMap{}
	cm.Name, cm.Namespace = "a", "default"
	data, err := encodeStored(res, cm)
	if err != nil {
		t.Fatal(err)
	}
	s := newSharedEvents(2)
	so := func(rev int64) store.Object {
		return store.Object{Key: store.Key{Cluster: "c", Resource: "configmaps", Namespace: "default", Name: "a"},
			Revision: rev, Value: data}
	}
	first, err := s.object(res, so(5))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.object(res, so(5))
	if first != again {
		t.Error("the same version was decoded twice")
	}
	if got := mustAccessor(first.Object).GetResourceVersion(); got != "5" {
		t.Errorf("resourceVersion = %q, want 5", got)
	}
	info, _ := serializerFor("application/json")
	b1, _ := first.Encoded("application/json", info.Serializer)
	b2, _ := first.Encoded("application/json", info.Serializer)
	if &b1[0] != &b2[0] {
		t.Error("the same encoding was made twice")
	}
	_, _ = s.object(res, so(6))
	_, _ = s.object(res, so(7)) // evicts 5
	if len(s.items) != 2 {
		t.Errorf("%d items kept, want the bound 2", len(s.items))
	}
	if evicted, _ := s.object(res, so(5)); evicted == first {
		t.Error("an evicted version was still shared")
	}
}
