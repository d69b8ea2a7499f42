package kubeapi

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// fieldManagers builds and caches one managedfields.FieldManager per (kind, subresource). A FieldManager tracks
// metadata.managedFields on every write and merges server-side apply requests.
type fieldManagers struct {
	mu        sync.Mutex // guards byKey and converter
	converter managedfields.TypeConverter
	byKey     map[fmKey]*managedfields.FieldManager
}

type fmKey struct {
	gvk         schema.GroupVersionKind
	subresource string
}

func newFieldManagers(tc managedfields.TypeConverter) *fieldManagers {
	if tc == nil {
		tc = managedfields.NewDeducedTypeConverter()
	}
	return &fieldManagers{converter: tc, byKey: map[fmKey]*managedfields.FieldManager{}}
}

// get returns the FieldManager of res (subresource "", "status", "resize" or one of its UpdateSubresources).
func (f *fieldManagers) get(res *resources.Resource, subresource string) (*managedfields.FieldManager, error) {
	k := fmKey{res.GVK, subresource}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.byKey[k]; ok {
		return fm, nil
	}
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	if us := res.UpdateSubresources[subresource]; us != nil {
		// A writer through the subresource manages the part it may change and nothing else (upstream's
		// EphemeralContainersStrategy.GetResetFieldsFilter).
		elems := make([]any, len(us.Owns))
		for i, e := range us.Owns {
			elems[i] = e
		}
		reset = map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(res.GVK.GroupVersion().String()): fieldpath.NewIncludeMatcherFilter(
				fieldpath.MakePrefixMatcherOrDie(elems...)),
		}
	} else if res.Status {
		path := "status"
		if subresource == "status" {
			path = "spec"
		}
		reset = map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(res.GVK.GroupVersion().String()): fieldpath.NewExcludeSetFilter(
				fieldpath.NewSet(fieldpath.MakePathOrDie(path))),
		}
	}
	if subresource == "resize" {
		// A resize sets only the containers' resources and resize policies (upstream's podResizeStrategy
		// resetFieldsFilter): server-side apply to /resize ignores the rest of what it is sent.
		var matchers []*fieldpath.SetMatcher
		for _, list := range []string{"containers", "initContainers"} {
			for _, f := range []string{"resources", "resizePolicy"} {
				matchers = append(matchers, fieldpath.MakePrefixMatcherOrDie("spec", list, fieldpath.MatchAnyPathElement(), f))
			}
		}
		reset = map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(res.GVK.GroupVersion().String()): fieldpath.NewIncludeMatcherFilter(matchers...)}
	}
	fm, err := managedfields.NewDefaultFieldManager(f.converter, resources.Scheme, defaulter{res}, resources.Scheme,
		res.GVK, res.GVK.GroupVersion(), subresource, reset)
	if err != nil {
		return nil, err
	}
	f.byKey[k] = fm
	return fm, nil
}

// defaulter applies a resource's defaulting for the field manager.
type defaulter struct{ res *resources.Resource }

func (d defaulter) Default(obj runtime.Object) {
	if d.res.Default != nil {
		d.res.Default(obj)
	}
}
