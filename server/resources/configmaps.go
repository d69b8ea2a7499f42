package resources

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Plural:     "configmaps",
		ShortNames: []string{"cm"},
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.ConfigMap{} },
		NewList:    func() runtime.Object { return &corev1.ConfigMapList{} },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateConfigMap(obj.(*corev1.ConfigMap)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateImmutableData(obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap))
		},
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn, {Name: "Data", Type: "string"}, ageColumn},
			Cells: func(obj runtime.Object, now time.Time) []any {
				cm := obj.(*corev1.ConfigMap)
				return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
			},
		},
	})
}

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	total := 0
	for k, v := range cm.Data {
		errs = append(errs, validateDataKey(field.NewPath("data").Key(k), k)...)
		if _, dup := cm.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k,
				"duplicate of key present in binaryData"))
		}
		total += len(v)
	}
	for k, v := range cm.BinaryData {
		errs = append(errs, validateDataKey(field.NewPath("binaryData").Key(k), k)...)
		total += len(v)
	}
	if total > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

// validateDataKey checks a ConfigMap or Secret key: a config key (letters, digits, "-", "_", ".").
func validateDataKey(p *field.Path, k string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	return errs
}

// validateImmutableData refuses changes to an immutable ConfigMap's data and unsetting immutable.
func validateImmutableData(cm, old *corev1.ConfigMap) field.ErrorList {
	if old.Immutable == nil || !*old.Immutable {
		return nil
	}
	var errs field.ErrorList
	if cm.Immutable == nil || !*cm.Immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	if !equalStringMaps(cm.Data, old.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	if len(cm.BinaryData) != len(old.BinaryData) {
		errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
	}
	return errs
}

func equalStringMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
