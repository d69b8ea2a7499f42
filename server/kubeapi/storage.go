package kubeapi

import (
	"bytes"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	kjson "sigs.k8s.io/json"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// storageCodec is the stored form: compact JSON with kind and apiVersion.
var storageCodec = json.NewSerializerWithOptions(json.DefaultMetaFactory, resources.Scheme, resources.Scheme,
	json.SerializerOptions{})

// key is the store key of an object of res in rq's cluster.
func (rq *request) key(res *resources.Resource, namespace, name string) store.Key {
	return store.Key{Cluster: rq.cluster.ID, Resource: res.Storage, Namespace: namespace, Name: name}
}

// encodeStored turns a served object into its stored bytes: converted to the storage form when the resource
// has one, without resourceVersion (the store's revision is the resourceVersion).
func encodeStored(res *resources.Resource, obj runtime.Object) ([]byte, error) {
	if res.Convert != nil {
		var err error
		if obj, err = res.Convert.ToStorage(obj); err != nil {
			return nil, fmt.Errorf("convert %s to its stored form: %w", res.GVK.Kind, err)
		}
	} else {
		setGVK(res, obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := m.GetResourceVersion()
	m.SetResourceVersion("")
	defer m.SetResourceVersion(rv)
	var buf bytes.Buffer
	if err := storageCodec.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeStored turns a stored object into the served typed object with its resourceVersion set.
func decodeStored(res *resources.Resource, o store.Object) (runtime.Object, error) {
	var obj runtime.Object
	if res.Convert == nil {
		// The stored form is the served type: unmarshal into it as the codec would (non-strict), without the
		// codec's first pass reading kind and apiVersion, which parses the whole document once more (a third of
		// a decode) to learn what the resource already says.
		obj = res.New()
		if err := kjson.UnmarshalCaseSensitivePreserveInts(o.Value, obj); err != nil {
			return nil, fmt.Errorf("decode stored %s: %w", o.Key, err)
		}
	} else {
		var err error
		if obj, _, err = storageCodec.Decode(o.Value, nil, nil); err != nil {
			return nil, fmt.Errorf("decode stored %s: %w", o.Key, err)
		}
		if obj, err = res.Convert.FromStorage(obj); err != nil {
			return nil, fmt.Errorf("convert stored %s: %w", o.Key, err)
		}
	}
	setGVK(res, obj)
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(strconv.FormatInt(o.Revision, 10))
	return obj, nil
}

// setGVK sets the served kind and apiVersion on obj.
func setGVK(res *resources.Resource, obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(res.GVK)
}

// parseRV parses a resourceVersion; "" is 0.
func parseRV(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	rv, err := strconv.ParseInt(s, 10, 64)
	if err != nil || rv < 0 {
		return 0, badRequestf("invalid resource version %q", s)
	}
	return rv, nil
}
