package kubeapi

import (
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// decodeBody decodes the request body into a new object of the request's resource, honouring fieldValidation
// (Strict: unknown or duplicate fields are 400; Warn, the default: they become Warning headers; Ignore).
func (rq *request) decodeBody() (runtime.Object, error) {
	body, err := rq.readBody()
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, badRequestf("the request body is empty: an object is required")
	}
	info, err := requestSerializer(rq.r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	mode, err := fieldValidation(rq.r.URL.Query().Get("fieldValidation"))
	if err != nil {
		return nil, err
	}
	dec := info.Serializer
	if mode != metav1.FieldValidationIgnore && info.StrictSerializer != nil {
		dec = info.StrictSerializer
	}
	gvk := rq.res.GVK
	obj, got, err := dec.Decode(body, &gvk, rq.res.New())
	if err != nil {
		strict, isStrict := runtime.AsStrictDecodingError(err)
		if !isStrict {
			return nil, badRequestf("the request body could not be decoded as %s: %v", rq.res.GVK.Kind, err)
		}
		if mode == metav1.FieldValidationStrict {
			return nil, apierrors.NewBadRequest(strict.Error())
		}
		if mode == metav1.FieldValidationWarn { // Ignore: the strict codecs report them too, but nothing is said
			for _, e := range strict.Errors() {
				rq.warn(e.Error())
			}
		}
	}
	if got != nil && (got.Group != gvk.Group || got.Version != gvk.Version || got.Kind != gvk.Kind) {
		return nil, badRequestf("the body is a %s (%s), but the request is for %s (%s)", got.Kind,
			got.GroupVersion(), gvk.Kind, gvk.GroupVersion())
	}
	if reflect.TypeOf(obj) != reflect.TypeOf(rq.res.New()) {
		return nil, badRequestf("the body is not a %s", gvk.Kind)
	}
	return obj, nil
}

// requestSerializer picks the decoder for a Content-Type; JSON when none is given.
func requestSerializer(contentType string) (runtime.SerializerInfo, error) {
	mt := "application/json"
	if contentType != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(contentType); err != nil {
			return runtime.SerializerInfo{}, unsupportedMediaType(contentType)
		}
	}
	info, ok := serializerFor(mt)
	if !ok || strings.Contains(mt, "*") {
		return runtime.SerializerInfo{}, unsupportedMediaType(contentType)
	}
	return info, nil
}

// decodeAs decodes the request body (JSON, YAML or protobuf, as its Content-Type says) into into, a kind the
// resource itself does not serve (Binding, TokenRequest, Scale); what is not such an object is a 400.
func (rq *request) decodeAs(gvk schema.GroupVersionKind, into runtime.Object) error {
	body, err := rq.readBody()
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return badRequestf("the request body is empty: a %s is required", gvk.Kind)
	}
	info, err := requestSerializer(rq.r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	if _, _, err := info.Serializer.Decode(body, &gvk, into); err != nil {
		return badRequestf("the body is not a valid %s: %v", gvk.Kind, err)
	}
	return nil
}

func unsupportedMediaType(ct string) error {
	return statusErr(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format (%q): accepted media types are "+
			"application/json, application/yaml, application/vnd.kubernetes.protobuf", ct))
}

// fieldValidation parses the fieldValidation parameter; the default is Warn, as upstream's.
func fieldValidation(v string) (string, error) {
	switch v {
	case "":
		return metav1.FieldValidationWarn, nil
	case metav1.FieldValidationIgnore, metav1.FieldValidationWarn, metav1.FieldValidationStrict:
		return v, nil
	}
	return "", badRequestf("fieldValidation %q is not valid: want Ignore, Warn or Strict", v)
}

// warn adds a Warning header (RFC 7234 code 299), as upstream does for warnings shown by kubectl.
func (rq *request) warn(msg string) {
	rq.w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
}

// dryRun reports whether dryRun=All was asked; any other value is 400.
func (rq *request) dryRun() (bool, error) {
	vals := rq.r.URL.Query()["dryRun"]
	for _, v := range vals {
		if v != metav1.DryRunAll {
			return false, badRequestf("dryRun %q is not supported: the only value is All", v)
		}
	}
	return len(vals) > 0, nil
}

// fieldManager is the manager name of a write: the fieldManager parameter, else the user agent's program name.
func (rq *request) fieldManager() (string, error) {
	m := rq.r.URL.Query().Get("fieldManager")
	if m == "" {
		m, _, _ = strings.Cut(rq.r.UserAgent(), "/")
		if m == "" {
			m = "unknown"
		}
	}
	if len(m) > 128 {
		return "", badRequestf("fieldManager must not be longer than 128 characters")
	}
	return m, nil
}

// contentTypeOf is the request's media type without parameters.
func contentTypeOf(r *http.Request) string {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

func requiredName() field.ErrorList {
	return field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")}
}
