package kubeapi

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
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
