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
		GVK:        corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
		Plural:     "serviceaccounts",
		ShortNames: []string{"sa"},
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.ServiceAccount{} },
		NewList:    func() runtime.Object { return &corev1.ServiceAccountList{} },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateServiceAccount(obj.(*corev1.ServiceAccount)) },
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn,
				{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]}, ageColumn},
			Cells: func(obj runtime.Object, now time.Time) []any {
				sa := obj.(*corev1.ServiceAccount)
				return []any{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp, now)}
			},
		},
	})
}

// validateServiceAccount checks the names of the referenced secrets and image pull secrets, when set.
func validateServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	var errs field.ErrorList
	for i, s := range sa.Secrets {
		if s.Name != "" {
			errs = append(errs, invalidEach(field.NewPath("secrets").Index(i).Child("name"), s.Name,
				validation.IsDNS1123Subdomain(s.Name))...)
		}
	}
	for i, s := range sa.ImagePullSecrets {
		if s.Name != "" {
			errs = append(errs, invalidEach(field.NewPath("imagePullSecrets").Index(i).Child("name"), s.Name,
				validation.IsDNS1123Subdomain(s.Name))...)
		}
	}
	return errs
}
