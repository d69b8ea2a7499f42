package kubeapi

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// Patch content types.
const (
	jsonPatchType      = "application/json-patch+json"
	mergePatchType     = "application/merge-patch+json"
	strategicPatchType = "application/strategic-merge-patch+json"
	applyPatchType     = "application/apply-patch+yaml"
)

// patch serves PATCH in the four upstream flavours. A patch that names a resourceVersion is conditional (409
// when stale); otherwise a lost race is retried on the new state. Server-side apply may create the object.
func (rq *request) patch() error {
	body, err := rq.readBody()
	if err != nil {
		return err
	}
	pt := contentTypeOf(rq.r)
	switch pt {
	case jsonPatchType, mergePatchType, strategicPatchType:
	case applyPatchType:
		return rq.apply(body)
	default:
		return unsupportedMediaType(rq.r.Header.Get("Content-Type"))
	}
	out, err := rq.updateLoop(0, func(old runtime.Object) (runtime.Object, error) {
		return rq.applyPatch(pt, body, old)
	})
	if err != nil {
		return err
	}
	return rq.writeObject(http.StatusOK, out)
}

// applyPatch applies a JSON, merge or strategic merge patch to old and decodes the result. A resourceVersion
// in the result that differs from old's is a conflict.
func (rq *request) applyPatch(pt string, patch []byte, old runtime.Object) (runtime.Object, error) {
	var doc bytes.Buffer
	if err := storageCodec.Encode(old, &doc); err != nil {
		return nil, internal(err)
	}
	patched, err := patchJSON(pt, doc.Bytes(), patch, rq.res.New())
	if err != nil {
		return nil, err
	}
	obj, err := rq.decodeBytes(patched)
	if err != nil {
		return nil, err
	}
	if rv := mustAccessor(obj).GetResourceVersion(); rv != "" && rv != mustAccessor(old).GetResourceVersion() {
		return nil, storeConflict(rq)
	}
	return obj, nil
}

// decodeBytes decodes a JSON object of the request's resource, honouring fieldValidation.
func (rq *request) decodeBytes(data []byte) (runtime.Object, error) {
	info, _ := serializerFor("application/json")
	mode, err := fieldValidation(rq.r.URL.Query().Get("fieldValidation"))
	if err != nil {
		return nil, err
	}
	dec := info.Serializer
	if mode != "Ignore" {
		dec = info.StrictSerializer
	}
	gvk := rq.res.GVK
	obj, _, err := dec.Decode(data, &gvk, rq.res.New())
	if err != nil {
		strict, isStrict := runtime.AsStrictDecodingError(err)
		if !isStrict {
			return nil, badRequestf("the patched object could not be decoded: %v", err)
		}
		if mode == "Strict" {
			return nil, apierrors.NewBadRequest(strict.Error())
		}
		if mode == "Warn" { // Ignore: the strict codecs report them too, but nothing is said
			for _, e := range strict.Errors() {
				rq.warn(e.Error())
			}
		}
	}
	return obj, nil
}

// apply serves server-side apply: the field manager merges the applied configuration into the live object,
// reporting conflicts with other managers (409) unless force=true; a missing object is created.
func (rq *request) apply(body []byte) error {
	manager := rq.r.URL.Query().Get("fieldManager")
	if manager == "" {
		return apierrors.NewBadRequest("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
	}
	force, _ := strconv.ParseBool(rq.r.URL.Query().Get("force"))
	applied := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(body, &applied.Object); err != nil {
		return badRequestf("the applied configuration is not valid YAML: %v", err)
	}
	if applied.Object == nil {
		return badRequestf("the applied configuration is empty")
	}
	if applied.GetName() != "" && applied.GetName() != rq.info.name {
		return badRequestf("the name of the applied object (%s) does not match the name on the URL (%s)",
			applied.GetName(), rq.info.name)
	}
	fm, err := rq.api.managers.get(rq.res, rq.info.subresource)
	if err != nil {
		return internal(err)
	}
	out, err := rq.updateLoop(0, func(old runtime.Object) (runtime.Object, error) {
		return fm.Apply(old, applied, manager, force)
	})
	if apierrors.IsNotFound(err) && rq.info.subresource == "" {
		obj, aerr := fm.Apply(rq.res.New(), applied, manager, force)
		if aerr != nil {
			return aerr
		}
		m := mustAccessor(obj)
		m.SetName(rq.info.name)
		m.SetNamespace(rq.info.namespace)
		created, cerr := rq.createObject(obj)
		if cerr != nil {
			return cerr
		}
		return rq.writeObject(http.StatusCreated, created)
	}
	if err != nil {
		return err
	}
	return rq.writeObject(http.StatusOK, out)
}

// maxJSONPatchOperations bounds the operations of one JSON patch, as upstream does.
const maxJSONPatchOperations = 10000

func init() {
	// A "copy" may double the document; bound what one patch can add, as upstream does (same limit).
	jsonpatch.AccumulatedCopySizeLimit = 3 * 1024 * 1024
}

func decodeJSONPatch(p []byte) (jsonpatch.Patch, error) {
	patch, err := jsonpatch.DecodePatch(p)
	if err != nil {
		return nil, err
	}
	if len(patch) > maxJSONPatchOperations {
		return nil, fmt.Errorf("the allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(patch))
	}
	return patch, nil
}

func mergePatch(doc, patch []byte) ([]byte, error) { return jsonpatch.MergePatch(doc, patch) }

func strategicPatch(doc, patch []byte, dataStruct any) ([]byte, error) {
	return strategicpatch.StrategicMergePatch(doc, patch, dataStruct)
}
