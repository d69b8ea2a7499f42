package resources

import (
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource describes one served resource. Only GVK, Plural, New and NewList are required; the zero value of every
// other field means "the Kubernetes default" as documented on it.
type Resource struct {
	// GVK is the served group, version and kind.
	GVK schema.GroupVersionKind
	// Plural is the URL segment ("pods"); Singular the lower-case kind ("pod", default strings.ToLower(Kind)).
	Plural, Singular string
	// ShortNames ("po") and Categories ("all") as shown in discovery.
	ShortNames, Categories []string
	// Namespaced resources live in a namespace; the others are cluster-scoped.
	Namespaced bool
	// Storage is the store's resource name (store.Key.Resource), shared by every API that serves the same objects
	// (core/v1 and events.k8s.io/v1 events). Default: Plural for the core group, else Plural + "." + Group.
	Storage string
	// Convert translates between the served form and the stored form when they differ (Storage names another
	// resource's objects). Nil: the served form is stored.
	Convert *Conversion

	// New returns an empty object of GVK (a *corev1.Pod); NewList its list (*corev1.PodList).
	New, NewList func() runtime.Object

	// Status: the resource has a /status subresource; updates of the main resource keep the stored status and
	// updates of /status keep everything but status.
	Status bool
	// Scale, when set, serves a /scale subresource (autoscaling/v1 Scale).
	Scale *Scale
	// UpdateSubresources are subresources through which an update or patch changes one part of an object and
	// nothing else, by name (pods/ephemeralcontainers). Each serves get, update and patch of the whole object.
	UpdateSubresources map[string]*UpdateSubresource
	// Resize, when set, serves a /resize subresource (pods): get, update and patch of the whole object, of which
	// an update keeps only what Resize.Prepare lets through.
	Resize *Resize
	// Generation: metadata.generation is 1 on create and bumped whenever anything outside metadata and status
	// changes.
	Generation bool
	// Verbs the resource serves; nil means all of get, list, watch, create, update, patch, delete,
	// deletecollection.
	Verbs []string
	// Virtual resources are never stored: the API computes the answer to a create (access reviews, whoami).
	// They serve only create and need no NewList.
	Virtual bool

	// NameValidation checks metadata.name (and generateName when prefix is true). Default: DNS-1123 subdomain.
	NameValidation func(name string, prefix bool) []string
	// Default fills in Kubernetes' defaults on a decoded object (create, update and patch results alike).
	Default func(obj runtime.Object)
	// Validate checks a new object beyond metadata (which the machinery validates). Nil: anything goes.
	Validate func(obj runtime.Object) field.ErrorList
	// ValidateUpdate checks an update against the stored object: immutable fields and transitions. The
	// machinery also runs Validate on the new object. Nil: only Validate.
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// ValidateStatus checks a /status update (nil: Validate).
	ValidateStatus func(obj, old runtime.Object) field.ErrorList
	// ValidateCreate checks what only a create may not set, beyond Validate (a pod's ephemeral containers,
	// which only pods/ephemeralcontainers adds). Nil: nothing more.
	ValidateCreate func(obj runtime.Object) field.ErrorList

	// Table describes `kubectl get` columns. Nil: NAME and AGE (Created At).
	Table *Table
	// Fields returns the resource's field-selector attributes beyond metadata.name and metadata.namespace, which
	// the machinery adds ("spec.nodeName" → "node-1").
	Fields func(obj runtime.Object) fields.Set
	// FieldIndex are field-selector attributes cheap enough to read for every event and watch (a struct field,
	// no allocation): a watch whose selector requires one of them to equal a value gets only the events of
	// objects with that value (upstream's indexed watch triggers: pods by spec.nodeName).
	FieldIndex map[string]func(obj runtime.Object) string
}

// Conversion translates a resource served in one form and stored in another.
type Conversion struct {
	ToStorage   func(obj runtime.Object) (runtime.Object, error)
	FromStorage func(obj runtime.Object) (runtime.Object, error)
}

// Scale reads and writes the replica count behind a /scale subresource.
type Scale struct {
	// Get reports spec and status replicas and the label selector (serialized, as in Scale.status.selector).
	Get func(obj runtime.Object) autoscalingv1.ScaleSpec
	// Status returns Scale.status for obj.
	Status func(obj runtime.Object) autoscalingv1.ScaleStatus
	// Set sets spec.replicas.
	Set func(obj runtime.Object, replicas int32)
}

// UpdateSubresource is a subresource whose updates change one part of an object, as upstream's
// pods/ephemeralcontainers: its body is the whole object (its kind is the resource's), of which the update keeps
// only that part.
type UpdateSubresource struct {
	// Owns is the path of the part it changes ("spec", "ephemeralContainers"): what a write through it may
	// change, and the only fields the writer's managed fields record.
	Owns []string
	// Prepare sets everything of obj outside the part it changes, metadata the update may not change included,
	// back to old's (the machinery keeps uid, name, creation and deletion as for any update).
	Prepare func(obj, old runtime.Object)
	// Validate checks the prepared object against old. The machinery also runs Validate on it, never
	// ValidateUpdate: the main resource's update rules are what the subresource is there to bypass.
	Validate func(obj, old runtime.Object) field.ErrorList
}

// Resize is a subresource that changes a narrow part of the object's spec (pods/resize: containers' resources
// and resize policies), with its own strategy as upstream's podResizeStrategy.
type Resize struct {
	// Prepare sets obj (a PUT body or a patch result) back to old everywhere but where a resize may change it.
	Prepare func(obj, old runtime.Object)
	// Validate checks a resize against the stored object; the machinery also runs Validate on the new object.
	Validate func(obj, old runtime.Object) field.ErrorList
}

// Table describes a resource's table output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`).
type Table struct {
	// Columns as Kubernetes prints them; the first is Name. Priority 1 columns appear only with -o wide.
	Columns []metav1.TableColumnDefinition
	// Cells returns one value per column (string, int64, int32, bool, float64) for obj at time now.
	Cells func(obj runtime.Object, now time.Time) []any
}

// GroupVersionResource is the resource's GVR.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.GVK.GroupVersion().WithResource(r.Plural)
}

// AllVerbs is the verb list of a resource that serves everything.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// HasVerb reports whether the resource serves verb.
func (r *Resource) HasVerb(verb string) bool {
	for _, v := range r.verbs() {
		if v == verb {
			return true
		}
	}
	return false
}

// ServedVerbs returns the resource's verbs in discovery order.
func (r *Resource) ServedVerbs() []string { return r.verbs() }

func (r *Resource) verbs() []string {
	if r.Verbs == nil {
		return AllVerbs
	}
	return r.Verbs
}
