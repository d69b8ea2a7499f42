package kubeapi

import (
	corev1 "k8s.io/api/core/v1"
	"reflect"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// keepsStatusOnCreate lists the resources whose status a create may set (a node registers with its status).
var keepsStatusOnCreate = map[string]bool{"nodes": true, "events": true}

// prepareCreate sets the server-owned metadata of a new object and resets what a create may not set.
func prepareCreate(res *resources.Resource, obj runtime.Object, now time.Time) {
	m := mustAccessor(obj)
	m.SetUID(types.UID(uuid.NewUUID()))
	m.SetCreationTimestamp(metav1.NewTime(now.Truncate(time.Second)))
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetResourceVersion("")
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + utilrand.String(5))
	}
	if res.Generation {
		m.SetGeneration(1)
	} else {
		m.SetGeneration(0)
	}
	if res.Status && !keepsStatusOnCreate[res.Storage] {
		resetField(obj, "Status")
	}
}

// prepareUpdate carries the server-owned metadata of old into obj and applies the status split (the main
// resource keeps the stored status; /status keeps everything but status; /resize keeps only what the resource's
// Resize strategy lets through).
func prepareUpdate(res *resources.Resource, obj, old runtime.Object, subresource string) {
	m, o := mustAccessor(obj), mustAccessor(old)
	if m.GetUID() == "" {
		m.SetUID(o.GetUID()) // as upstream: an update without a UID keeps the object's; another UID is invalid
	}
	m.SetCreationTimestamp(o.GetCreationTimestamp())
	m.SetDeletionTimestamp(o.GetDeletionTimestamp())
	m.SetDeletionGracePeriodSeconds(o.GetDeletionGracePeriodSeconds())
	m.SetGeneration(o.GetGeneration())
	m.SetName(o.GetName())
	m.SetNamespace(o.GetNamespace())
	switch us := res.UpdateSubresources[subresource]; {
	case subresource == "resize" && res.Resize != nil:
		res.Resize.Prepare(obj, old)
	case subresource == "status":
		copyAllBut(obj, old, "Status", "ObjectMeta", "TypeMeta")
		m.SetDeletionTimestamp(o.GetDeletionTimestamp())
		m.SetOwnerReferences(o.GetOwnerReferences())
	case us != nil:
		us.Prepare(obj, old)
	case res.Status:
		copyField(obj, old, "Status")
	}
	// A namespace's spec.finalizers change only through /finalize (the namespace controller's call).
	if ns, ok := obj.(*corev1.Namespace); ok && subresource != "finalize" {
		ns.Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
	}
}

// finalizersPending reports whether obj still waits for finalizers: metadata.finalizers, and for a namespace
// also spec.finalizers.
func finalizersPending(obj runtime.Object) bool {
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return true
	}
	return len(mustAccessor(obj).GetFinalizers()) > 0
}

// bumpGeneration increments metadata.generation when anything outside metadata and status changed. Call it
// after defaulting, so that a PUT leaving out defaulted fields is not a change.
func bumpGeneration(res *resources.Resource, obj, old runtime.Object) {
	if res.Generation && !equalOutside(obj, old, "Status", "ObjectMeta", "TypeMeta") {
		m := mustAccessor(obj)
		m.SetGeneration(mustAccessor(old).GetGeneration() + 1)
	}
}

// validateCreate runs metadata and kind validation of a new object.
func validateCreate(res *resources.Resource, obj runtime.Object) error {
	m := mustAccessor(obj)
	nameFn := apivalidation.ValidateNameFunc(resources.ValidateDNSSubdomainName)
	if res.NameValidation != nil {
		nameFn = apivalidation.ValidateNameFunc(res.NameValidation)
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.Namespaced, storableName(nameFn), field.NewPath("metadata"))
	if res.Validate != nil {
		errs = append(errs, res.Validate(obj)...)
	}
	if res.ValidateCreate != nil {
		errs = append(errs, res.ValidateCreate(obj)...)
	}
	return invalid(res, m.GetName(), errs)
}

// validateUpdate runs metadata, kind and update validation.
func validateUpdate(res *resources.Resource, obj, old runtime.Object, subresource string) error {
	m := mustAccessor(obj)
	errs := apivalidation.ValidateObjectMetaAccessorUpdate(m, mustAccessor(old), field.NewPath("metadata"))
	switch us := res.UpdateSubresources[subresource]; {
	case subresource == "status" && res.ValidateStatus != nil:
		errs = append(errs, res.ValidateStatus(obj, old)...)
	case us != nil:
		if res.Validate != nil {
			errs = append(errs, res.Validate(obj)...)
		}
		errs = append(errs, us.Validate(obj, old)...)
	case subresource == "resize" && res.Resize != nil:
		if res.Validate != nil {
			errs = append(errs, res.Validate(obj)...)
		}
		errs = append(errs, res.Resize.Validate(obj, old)...)
	default:
		if res.Validate != nil {
			errs = append(errs, res.Validate(obj)...)
		}
		if res.ValidateUpdate != nil {
			errs = append(errs, res.ValidateUpdate(obj, old)...)
		}
	}
	return invalid(res, m.GetName(), errs)
}

func invalid(res *resources.Resource, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(res.GVK.GroupKind(), name, errs)
}

func mustAccessor(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err) // every served kind has ObjectMeta; the registry test checks it
	}
	return m
}

// resetField zeroes the named top-level field of a typed object, if it has one.
func resetField(obj runtime.Object, name string) {
	if f := reflect.ValueOf(obj).Elem().FieldByName(name); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

// copyField copies the named top-level field from src to dst (same type).
func copyField(dst, src runtime.Object, name string) {
	d := reflect.ValueOf(dst).Elem().FieldByName(name)
	s := reflect.ValueOf(src).Elem().FieldByName(name)
	if d.IsValid() && d.CanSet() && s.IsValid() {
		d.Set(s)
	}
}

// copyAllBut copies every top-level field except those named from src to dst.
func copyAllBut(dst, src runtime.Object, except ...string) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	for i := range d.NumField() {
		if name := d.Type().Field(i).Name; !contains(except, name) && d.Field(i).CanSet() {
			d.Field(i).Set(s.Field(i))
		}
	}
}

// equalOutside reports whether a and b agree on every top-level field except those named.
func equalOutside(a, b runtime.Object, except ...string) bool {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range av.NumField() {
		if name := av.Type().Field(i).Name; !contains(except, name) &&
			!apiequality.Semantic.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
