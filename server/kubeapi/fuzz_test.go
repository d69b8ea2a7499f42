package kubeapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// fuzzRequest is a request for resource gvr with no API behind it: enough for the decoding and parsing stages.
func fuzzRequest(t testing.TB, gvr schema.GroupVersionResource, r *http.Request) *request {
	t.Helper()
	res, ok := resources.Default().Lookup(gvr)
	if !ok {
		t.Fatalf("%v is not in the default registry", gvr)
	}
	return &request{w: httptest.NewRecorder(), r: r, ctx: r.Context(), res: res,
		info: requestInfo{resource: true, verb: "create", gv: gvr.GroupVersion(), plural: gvr.Resource, namespace: "default"}}
}

// requireClientError fails unless err is an API Status in the 4xx range (never an internal error).
func requireClientError(t *testing.T, err error) {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not an API Status", err, err)
	}
	if code := se.Status().Code; code < 400 || code >= 500 {
		t.Fatalf("error %v has code %d, want 4xx", err, code)
	}
}

func FuzzParseRequestInfo(f *testing.F) {
	for _, p := range []string{"/api/v1/namespaces/default/pods/p/status", "/apis/apps/v1/watch/namespaces/x/deployments",
		"/api/v1/namespaces/x", "/api/v1/namespaces/x/finalize", "/api/v1//x", "/api/v1/namespaces/d/pods/p/proxy/a//b/",
		"/apis/a/b/namespaces//y", "api//0//0", "/version", "", "///"} {
		f.Add(http.MethodGet, p, false)
	}
	f.Add(http.MethodDelete, "/api/v1/namespaces/default/configmaps", true)
	f.Fuzz(func(t *testing.T, method, path string, watch bool) {
		ri := parseRequestInfo(method, path, watch)
		if !ri.resource {
			return
		}
		if ri.plural == "" {
			t.Errorf("%s %q: resource request without a plural: %+v", method, path, ri)
		}
		if ri.subresource != "" && ri.name == "" {
			t.Errorf("%s %q: subresource %q without a name", method, path, ri.subresource)
		}
	})
}

func FuzzNegotiate(f *testing.F) {
	for _, a := range []string{"", "*/*", "application/json;as=Table;g=meta.k8s.io;v=v1",
		"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
		"application/yaml;pretty=1", "application/vnd.kubernetes.protobuf;stream=watch", "text/html, ;;;=,*/*;q=0.1"} {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		out, ok := negotiate(accept, "Table", "PartialObjectMetadata", "PartialObjectMetadataList", "APIGroupDiscoveryList")
		if !ok {
			return
		}
		if out.info.Serializer == nil {
			t.Fatalf("Accept %q: negotiated without a serializer", accept)
		}
		if out.contentType() == "" || out.encoder() == nil {
			t.Fatalf("Accept %q: no content type or encoder", accept)
		}
	})
}

func FuzzSelectors(f *testing.F) {
	for _, s := range [][2]string{{"app=x,tier!=db", "metadata.name=a"}, {"a in (b,c),!d", "spec.nodeName!=n,status.phase=Running"},
		{"a in (", "==="}, {"x", "metadata.namespace=default,"}, {"a=b=c", `a\,b=c`}} {
		f.Add(s[0], s[1])
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	rq := fuzzRequest(f, corev1.SchemeGroupVersion.WithResource("pods"), httptest.NewRequest(http.MethodGet, "/", nil))
	f.Fuzz(func(t *testing.T, ls, fs string) {
		sel, err := rq.selectors(ls, fs)
		if err != nil {
			requireClientError(t, err)
			return
		}
		sel.matches(rq.res, pod)
		_ = sel.name()
	})
}

func FuzzApplyPatch(f *testing.F) {
	seeds := []struct {
		pt    string
		patch string
	}{
		{jsonPatchType, `[{"op":"add","path":"/data/b","value":"2"},{"op":"remove","path":"/data/a"}]`},
		{jsonPatchType, `[{"op":"copy","from":"/data","path":"/binaryData"}]`},
		{jsonPatchType, `[{"op":`},
		{mergePatchType, `{"data":{"a":null,"c":"3"},"metadata":{"labels":{"l":"v"}}}`},
		{mergePatchType, `{"data":5}`},
		{strategicPatchType, `{"metadata":{"$patch":"replace","name":"a"}}`},
		{strategicPatchType, `{"$setElementOrder/data":[],"data":{"x":"y"}}`},
	}
	for _, s := range seeds {
		f.Add(s.pt, []byte(s.patch))
	}
	var doc bytes.Buffer
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", ResourceVersion: "7", Labels: map[string]string{"k": "v"}},
		Data:       map[string]string{"a": "1"}}
	if err := storageCodec.Encode(cm, &doc); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pt string, patch []byte) {
		switch pt {
		case jsonPatchType, mergePatchType, strategicPatchType:
		default:
			pt = jsonPatchType
		}
		r := httptest.NewRequest(http.MethodPatch, "/?fieldValidation=Warn", nil)
		rq := fuzzRequest(t, corev1.SchemeGroupVersion.WithResource("configmaps"), r)
		patched, err := patchJSON(pt, doc.Bytes(), patch, &corev1.ConfigMap{})
		if err != nil {
			requireClientError(t, err)
			return
		}
		obj, err := rq.decodeBytes(patched)
		if err != nil {
			requireClientError(t, err)
			return
		}
		if _, ok := obj.(*corev1.ConfigMap); !ok {
			t.Fatalf("patched object is a %T", obj)
		}
	})
}

func FuzzDecodeBody(f *testing.F) {
	for _, s := range []struct{ ct, body string }{
		{"application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`},
		{"application/json", `{"apiVersion":"v1","kind":"Pod","bogus":1,"spec":{"spec":1}}`},
		{"application/yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"},
		{"application/yaml", "a: &a [*a]\n"},
		{"application/vnd.kubernetes.protobuf", "k8s\x00\x0a\x09\x0a\x02v1\x12\x03Pod"},
		{"", `{"kind":"Secret","apiVersion":"v1"}`},
		{"text/plain", "x"},
	} {
		f.Add(s.ct, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		rq := fuzzRequest(t, corev1.SchemeGroupVersion.WithResource("pods"), r)
		obj, err := rq.decodeBody()
		if err != nil {
			requireClientError(t, err)
			return
		}
		if _, ok := obj.(*corev1.Pod); !ok {
			t.Fatalf("decoded a %T, want *corev1.Pod", obj)
		}
	})
}
