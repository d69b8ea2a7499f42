package kubeapi

import (
	"net/http"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// get serves GET of one object. It reads the store, whose current state satisfies every resourceVersion a client
// may pass, except for "0" (any state), which a running watch-cache collection answers when it holds the object.
func (rq *request) get() error {
	rv := rq.r.URL.Query().Get("resourceVersion")
	if _, err := parseRV(rv); err != nil {
		return err
	}
	if rv == "0" {
		// Any state will do (upstream serves it from its watch cache): a running collection's copy, when it
		// has one, spares the store a read (kubelet reads its Node so every 10 s). Else the store.
		if obj, _, ok := rq.cachedCopy(rq.info.namespace, rq.info.name); ok {
			return rq.writeObject(http.StatusOK, obj)
		}
	}
	obj, _, err := rq.load(rq.info.namespace, rq.info.name)
	if err != nil {
		return err
	}
	return rq.writeObject(http.StatusOK, obj)
}

// load reads one object of the request's resource.
func (rq *request) load(namespace, name string) (runtime.Object, store.Object, error) {
	so, err := rq.api.cfg.Storage.Get(rq.ctx, rq.key(rq.res, namespace, name))
	if err != nil {
		return nil, store.Object{}, storeError(err, rq.gr(), name)
	}
	obj, err := decodeStored(rq.res, so)
	if err != nil {
		return nil, store.Object{}, internal(err)
	}
	return obj, so, nil
}

// list serves LIST with label and field selectors, paging and resourceVersion semantics.
func (rq *request) list() error {
	q := rq.r.URL.Query()
	sel, err := rq.selectors(q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		return err
	}
	opts, err := listOptions(q)
	if err != nil {
		return err
	}
	opts.Cluster, opts.Resource, opts.Namespace = rq.cluster.ID, rq.res.Storage, rq.info.namespace
	if items, rev, cont, served, err := rq.listFromCache(q, opts, sel); served {
		if err != nil {
			return err
		}
		return rq.writeList(items, rev, cont)
	}
	if opts.Revision == 0 && rq.collection(rq.res) != nil { // cached, but the cache could not serve it: a bounded store read
		release, err := rq.storeFallback()
		if err != nil {
			return err
		}
		defer release()
	}
	items, rev, cont, err := rq.listFiltered(opts, sel)
	if err != nil {
		return err
	}
	return rq.writeList(items, rev, cont)
}

// listFiltered reads pages from the store until limit matching items are found (or the list ends), as the
// upstream storage does: a selective list with a limit may return fewer items and a continue token.
func (rq *request) listFiltered(opts store.ListOptions, sel selector) ([]runtime.Object, int64, string, error) {
	limit := opts.Limit
	var out []runtime.Object
	for {
		if limit > 0 {
			opts.Limit = limit - len(out)
		}
		page, err := rq.api.cfg.Storage.List(rq.ctx, opts)
		if err != nil {
			return nil, 0, "", storeError(err, rq.gr(), "")
		}
		for _, so := range page.Items {
			obj, err := decodeStored(rq.res, so)
			if err != nil {
				return nil, 0, "", internal(err)
			}
			if sel.matches(rq.res, obj) {
				out = append(out, obj)
			}
		}
		if page.Continue == "" || limit == 0 || len(out) >= limit {
			return out, page.Revision, page.Continue, nil
		}
		opts.Continue = page.Continue
	}
}

// listOptions reads limit, continue, resourceVersion and resourceVersionMatch.
func listOptions(q map[string][]string) (store.ListOptions, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var opts store.ListOptions
	if l := get("limit"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n < 0 {
			return opts, badRequestf("invalid limit %q", l)
		}
		opts.Limit = int(min(n, 1<<20))
	}
	opts.Continue = get("continue")
	rvStr, match := get("resourceVersion"), get("resourceVersionMatch")
	rv, err := parseRV(rvStr)
	if err != nil {
		return opts, err
	}
	if opts.Continue != "" && rvStr != "" && rvStr != "0" {
		return opts, badRequestf("specifying resource version is not allowed when using continue")
	}
	switch metav1.ResourceVersionMatch(match) {
	case "":
		if rv > 0 && opts.Limit > 0 {
			opts.Revision = rv // a paged list at a given version reads exactly that version (legacy semantics)
		}
	case metav1.ResourceVersionMatchExact:
		if rvStr == "" || rv == 0 {
			return opts, badRequestf("resourceVersionMatch %q requires a non-zero resourceVersion", match)
		}
		opts.Revision = rv
	case metav1.ResourceVersionMatchNotOlderThan:
		if rvStr == "" {
			return opts, badRequestf("resourceVersionMatch %q requires resourceVersion", match)
		}
	default:
		return opts, badRequestf("invalid resourceVersionMatch %q: want Exact or NotOlderThan", match)
	}
	return opts, nil
}

// writeList writes items as the resource's list kind, or as a Table / PartialObjectMetadataList.
func (rq *request) writeList(items []runtime.Object, rev int64, cont string) error {
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10), Continue: cont}
	switch rq.out.as {
	case "Table":
		rq.write(http.StatusOK, rq.table(items, lm))
		return nil
	case "PartialObjectMetadataList":
		list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList",
			APIVersion: "meta.k8s.io/v1"}, ListMeta: lm}
		for _, obj := range items {
			list.Items = append(list.Items, *partial(obj))
		}
		rq.write(http.StatusOK, list)
		return nil
	}
	list := rq.res.NewList()
	if err := meta.SetList(list, items); err != nil {
		return internal(err)
	}
	lma, err := meta.ListAccessor(list)
	if err != nil {
		return internal(err)
	}
	lma.SetResourceVersion(lm.ResourceVersion)
	lma.SetContinue(lm.Continue)
	list.GetObjectKind().SetGroupVersionKind(rq.res.GVK.GroupVersion().WithKind(rq.res.GVK.Kind + "List"))
	rq.write(http.StatusOK, list)
	return nil
}

// writeObject writes one object in the negotiated form.
func (rq *request) writeObject(code int, obj runtime.Object) error {
	switch rq.out.as {
	case "Table":
		m := mustAccessor(obj)
		rq.write(code, rq.table([]runtime.Object{obj}, metav1.ListMeta{ResourceVersion: m.GetResourceVersion()}))
		return nil
	case "PartialObjectMetadata":
		rq.write(code, partial(obj))
		return nil
	}
	rq.write(code, obj)
	return nil
}

// partial is obj's metadata as a PartialObjectMetadata.
func partial(obj runtime.Object) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}}
	if om, ok := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta); ok {
		p.ObjectMeta = *om.DeepCopy()
	}
	return p
}
