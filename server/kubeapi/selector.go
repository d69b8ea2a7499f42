package kubeapi

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
)

// selector is a parsed label and field selector.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

// selectors parses the labelSelector and fieldSelector parameters; a bad selector or an unsupported field is 400.
func (rq *request) selectors(ls, fs string) (selector, error) {
	sel := selector{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if ls != "" {
		if sel.labels, err = labels.Parse(ls); err != nil {
			return sel, badRequestf("unable to parse requirement: %v", err)
		}
	}
	if fs != "" {
		if sel.fields, err = fields.ParseSelector(fs); err != nil {
			return sel, badRequestf("invalid field selector: %v", err)
		}
		known := objectFields(rq.res, rq.res.New())
		for _, r := range sel.fields.Requirements() {
			if _, ok := known[r.Field]; !ok {
				return sel, badRequestf("field label not supported: %s", r.Field)
			}
		}
	}
	return sel, nil
}

// matches reports whether obj satisfies both selectors.
func (s selector) matches(res *resources.Resource, obj runtime.Object) bool {
	if s.labels.Empty() && s.fields.Empty() {
		return true
	}
	m := mustAccessor(obj)
	if !s.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return s.fields.Empty() || s.fields.Matches(objectFields(res, obj))
}

// cacheIndexValue is the value of the watch cache's index (cacheIndex: pods by spec.nodeName) the selector
// requires, if it requires one: a node agent's pod watch.
func (s selector) cacheIndexValue(res *resources.Resource) (string, bool) {
	if res.Storage != "pods" || s.fields.Empty() {
		return "", false
	}
	for _, r := range s.fields.Requirements() {
		if r.Field == cacheIndexField && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			return r.Value, true
		}
	}
	return "", false
}

// watchFilter is a cheap pre-filter for a cache watch: the object must have the value the selector requires of
// each indexed field of res (resources.Resource.FieldIndex); nil when the selector requires none.
func (s selector) watchFilter(res *resources.Resource) func(*watchcache.Entry) bool {
	if len(res.FieldIndex) == 0 || s.fields.Empty() {
		return nil
	}
	type want struct {
		get   func(runtime.Object) string
		value string
	}
	var wants []want
	for _, r := range s.fields.Requirements() {
		if get, ok := res.FieldIndex[r.Field]; ok && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			wants = append(wants, want{get, r.Value})
		}
	}
	if len(wants) == 0 {
		return nil
	}
	return func(e *watchcache.Entry) bool {
		for _, w := range wants {
			if w.get(e.Object) != w.value {
				return false
			}
		}
		return true
	}
}

// name returns the name a field selector pins with metadata.name=X, if any.
func (s selector) name() string {
	if v, ok := s.fields.RequiresExactMatch("metadata.name"); ok {
		return v
	}
	return ""
}

// objectFields is obj's field-selector attributes: metadata.name, metadata.namespace and the kind's own.
func objectFields(res *resources.Resource, obj runtime.Object) fields.Set {
	m := mustAccessor(obj)
	set := fields.Set{"metadata.name": m.GetName()}
	if res.Namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	if res.Fields != nil {
		for k, v := range res.Fields(obj) {
			set[k] = v
		}
	}
	return set
}

// empty reports whether the selector selects everything.
func (s selector) empty() bool { return s.labels.Empty() && s.fields.Empty() }
