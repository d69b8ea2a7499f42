package resources

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("Secret"),
		Plural:     "secrets",
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.Secret{} },
		NewList:    func() runtime.Object { return &corev1.SecretList{} },
		Default:    func(obj runtime.Object) { defaultSecret(obj.(*corev1.Secret)) },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateSecret(obj.(*corev1.Secret)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateSecretUpdate(obj.(*corev1.Secret), old.(*corev1.Secret))
		},
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn,
				{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
				{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
				ageColumn},
			Cells: func(obj runtime.Object, now time.Time) []any {
				s := obj.(*corev1.Secret)
				return []any{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp, now)}
			},
		},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"type": string(obj.(*corev1.Secret).Type)}
		},
	})
}

// defaultSecret sets type Opaque when unset and merges the write-only stringData into data (stringData wins), as
// the API server does when it converts a v1 Secret.
func defaultSecret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// validateSecret checks keys, the 1 MiB size limit and the keys and annotations each built-in type requires.
func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	dp := field.NewPath("data")
	total := 0
	for _, k := range sortedKeys(s.Data) {
		errs = append(errs, validateDataKey(dp.Key(k), k)...)
		total += len(s.Data[k])
	}
	if total > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(dp, "", corev1.MaxSecretSize))
	}
	return append(errs, validateSecretType(s, dp)...)
}

// validateSecretType checks what the built-in secret types require; other types are free-form.
func validateSecretType(s *corev1.Secret, dp *field.Path) field.ErrorList {
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			return field.ErrorList{field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), "")}
		}
	case corev1.SecretTypeDockercfg:
		return validateJSONKey(s.Data, corev1.DockerConfigKey, dp)
	case corev1.SecretTypeDockerConfigJson:
		return validateJSONKey(s.Data, corev1.DockerConfigJsonKey, dp)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, password := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !password {
			return field.ErrorList{field.Required(dp.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dp.Key(corev1.BasicAuthPasswordKey), "")}
		}
	case corev1.SecretTypeSSHAuth:
		return requiredKeys(s.Data, dp, corev1.SSHAuthPrivateKey)
	case corev1.SecretTypeTLS:
		return requiredKeys(s.Data, dp, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return nil
}

// requiredKeys requires each key in data.
func requiredKeys(data map[string][]byte, dp *field.Path, keys ...string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range keys {
		if _, ok := data[k]; !ok {
			errs = append(errs, field.Required(dp.Key(k), ""))
		}
	}
	return errs
}

// validateJSONKey requires data[key] to hold JSON; the error hides the secret's contents.
func validateJSONKey(data map[string][]byte, key string, dp *field.Path) field.ErrorList {
	v, ok := data[key]
	if !ok {
		return field.ErrorList{field.Required(dp.Key(key), "")}
	}
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil {
		return field.ErrorList{field.Invalid(dp.Key(key), "<secret contents redacted>", err.Error())}
	}
	return nil
}

// validateSecretUpdate keeps the type and, once immutable is set, the data and the immutable flag.
func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	if s.Type != old.Type {
		errs = append(errs, field.Invalid(field.NewPath("type"), s.Type, "field is immutable"))
	}
	if old.Immutable == nil || !*old.Immutable {
		return errs
	}
	const msg = "field is immutable when `immutable` is set"
	if s.Immutable == nil || !*s.Immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), msg))
	}
	if !equalByteMaps(s.Data, old.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), msg))
	}
	return errs
}

func equalByteMaps(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}
