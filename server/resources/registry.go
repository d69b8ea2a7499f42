package resources

import (
	"fmt"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
)

// builtin collects the Resources registered by this package's kind files (one init per file).
var builtin []*Resource

// register adds a kind file's resource to the built-in registry. Called from init only.
func register(r *Resource) { builtin = append(builtin, r) }

// groupOrder is the order of API groups in discovery, Kubernetes' own: clients resolving a short or plural name
// that several groups serve take the first.
var groupOrder = []string{
	"", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch",
	"certificates.k8s.io", "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
	"admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io",
	"node.k8s.io", "discovery.k8s.io", "flowcontrol.apiserver.k8s.io",
}

// Registry is an immutable set of Resources, indexed for the API machinery.
type Registry struct {
	all    []*Resource // in discovery order: groups by groupOrder, then by plural
	byGVR  map[schema.GroupVersionResource]*Resource
	scheme *runtime.Scheme
}

// Default returns a registry of every built-in resource.
func Default() *Registry {
	r, err := New(builtin...)
	if err != nil {
		panic(err) // the built-in set is fixed at compile time; TestDefaultRegistry covers it
	}
	return r
}

// New builds a registry, filling in defaults (Singular, Storage) and rejecting duplicates and incomplete entries.
func New(list ...*Resource) (*Registry, error) {
	reg := &Registry{byGVR: map[schema.GroupVersionResource]*Resource{}, scheme: Scheme}
	for _, r := range list {
		if r.Plural == "" || r.GVK.Kind == "" || r.GVK.Version == "" || r.New == nil || (r.NewList == nil && !r.Virtual) {
			return nil, fmt.Errorf("resources: %v/%s: GVK, Plural, New and NewList (unless Virtual) are required", r.GVK, r.Plural)
		}
		if r.Singular == "" {
			r.Singular = strings.ToLower(r.GVK.Kind)
		}
		if r.Storage == "" {
			r.Storage = r.Plural
			if r.GVK.Group != "" {
				r.Storage += "." + r.GVK.Group
			}
		}
		gvr := r.GroupVersionResource()
		if _, dup := reg.byGVR[gvr]; dup {
			return nil, fmt.Errorf("resources: %v registered twice", gvr)
		}
		reg.byGVR[gvr] = r
		reg.all = append(reg.all, r)
	}
	slices.SortStableFunc(reg.all, func(a, b *Resource) int {
		if c := groupRank(a.GVK.Group) - groupRank(b.GVK.Group); c != 0 {
			return c
		}
		if c := strings.Compare(a.GVK.Group, b.GVK.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Plural, b.Plural)
	})
	return reg, nil
}

func groupRank(g string) int {
	if i := slices.Index(groupOrder, g); i >= 0 {
		return i
	}
	return len(groupOrder)
}

// Lookup finds the resource served at group/version/plural.
func (reg *Registry) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	r, ok := reg.byGVR[gvr]
	return r, ok
}

// All returns every resource in discovery order. The caller must not modify the slice.
func (reg *Registry) All() []*Resource { return reg.all }

// GroupVersions returns the served group versions in discovery order.
func (reg *Registry) GroupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, r := range reg.all {
		gv := r.GVK.GroupVersion()
		if !slices.Contains(out, gv) {
			out = append(out, gv)
		}
	}
	return out
}

// InGroupVersion returns the resources served in gv, in discovery order.
func (reg *Registry) InGroupVersion(gv schema.GroupVersion) []*Resource {
	var out []*Resource
	for _, r := range reg.all {
		if r.GVK.GroupVersion() == gv {
			out = append(out, r)
		}
	}
	return out
}

// Scheme knows every k8s.io/api type and meta.k8s.io/v1 (Status, Table, WatchEvent, options).
var Scheme = clientscheme.Scheme

func init() {
	// Aggregated discovery documents are served by the API too.
	utilruntime.Must(apidiscoveryv2.AddToScheme(Scheme))
	// Options and watch events as meta.k8s.io/v1 (kubectl sends DeleteOptions with that apiVersion).
	metav1.AddToGroupVersion(Scheme, metav1.SchemeGroupVersion)
}
