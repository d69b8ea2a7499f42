package resources

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
		Plural:     "controllerrevisions",
		Namespaced: true,
		New:        func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:    func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateControllerRevision(obj.(*appsv1.ControllerRevision))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			cr, oldCR := obj.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision)
			if equalRawExtensions(cr.Data, oldCR.Data) {
				return nil
			}
			return field.ErrorList{field.Invalid(field.NewPath("data"), cr.Data, apivalidation.FieldImmutableErrorMsg)}
		},
		Table: &Table{Columns: controllerRevisionColumns, Cells: controllerRevisionCells},
	})
}

// validateControllerRevision requires data and a non-negative revision.
func validateControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	var errs field.ErrorList
	if len(cr.Data.Raw) == 0 && cr.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	return append(errs, apivalidation.ValidateNonnegativeField(cr.Revision, field.NewPath("revision"))...)
}

// equalRawExtensions compares two embedded objects by their JSON meaning, so re-encoding (key order,
// whitespace) is not a change.
func equalRawExtensions(a, b runtime.RawExtension) bool {
	ja, errA := rawJSON(a)
	jb, errB := rawJSON(b)
	if errA != nil || errB != nil {
		return bytes.Equal(a.Raw, b.Raw)
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return bytes.Equal(ja, jb)
	}
	return reflect.DeepEqual(va, vb)
}

// rawJSON returns the JSON of an embedded object, encoding Object when Raw is unset.
func rawJSON(r runtime.RawExtension) ([]byte, error) {
	if r.Raw != nil || r.Object == nil {
		return r.Raw, nil
	}
	return json.Marshal(r.Object)
}

var controllerRevisionColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Controller", "Controller of the object"),
	integerColumn("Revision", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
	ageColumn,
}

// controllerRevisionCells: NAME CONTROLLER ("statefulset.apps/web", "<none>") REVISION AGE.
func controllerRevisionCells(obj runtime.Object, now time.Time) []any {
	cr := obj.(*appsv1.ControllerRevision)
	controller := "<none>"
	if ref := metav1.GetControllerOf(cr); ref != nil {
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		controller = strings.ToLower(gv.WithKind(ref.Kind).GroupKind().String()) + "/" + ref.Name
	}
	return []any{cr.Name, controller, cr.Revision, age(cr.CreationTimestamp, now)}
}
