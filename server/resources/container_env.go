package resources

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podEnvFieldPaths are the pod fields an env var's fieldRef may select; metadata.labels['k'] and
// metadata.annotations['k'] are accepted too.
var podEnvFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels",
	"metadata.annotations", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs",
	"status.podIP", "status.podIPs"}

// podVolumeFieldPaths are the pod fields a downward API volume file may select.
var podVolumeFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels",
	"metadata.annotations"}

// containerResourceFields are the resources a resourceFieldRef may select (plus hugepages sizes).
var containerResourceFields = []string{"limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage"}

// validateEnv checks env var names and their valueFrom sources.
func validateEnv(env []corev1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range env {
		ip := p.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), ""))
		} else {
			errs = append(errs, invalidEach(ip.Child("name"), ev.Name, validation.IsRelaxedEnvVarName(ev.Name))...)
		}
		if ev.ValueFrom != nil {
			errs = append(errs, validateEnvVarSource(&ev, ip.Child("valueFrom"))...)
		}
	}
	return errs
}

// validateEnvVarSource requires exactly one source, no literal value beside it, and a valid selector.
func validateEnvVarSource(ev *corev1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := ev.ValueFrom
	switch n := len(setFields(s)); {
	case n == 0:
		errs = append(errs, field.Invalid(p, "",
			"must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case n > 1:
		errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(p, "", "may not be specified when `value` is not empty"))
	}
	if s.FieldRef != nil {
		errs = append(errs, validateObjectFieldSelector(s.FieldRef, podEnvFieldPaths, p.Child("fieldRef"))...)
	}
	if s.ResourceFieldRef != nil {
		errs = append(errs, validateResourceFieldRef(s.ResourceFieldRef, p.Child("resourceFieldRef"))...)
	}
	if r := s.ConfigMapKeyRef; r != nil {
		errs = append(errs, validateKeySelector(r.Name, r.Key, p.Child("configMapKeyRef"))...)
	}
	if r := s.SecretKeyRef; r != nil {
		errs = append(errs, validateKeySelector(r.Name, r.Key, p.Child("secretKeyRef"))...)
	}
	if r := s.FileKeyRef; r != nil {
		errs = append(errs, validateFileKeyRef(r, p.Child("fileKeyRef"))...)
	}
	return errs
}

// validateObjectFieldSelector requires an apiVersion and a supported fieldPath.
func validateObjectFieldSelector(fs *corev1.ObjectFieldSelector, supported []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if fs.APIVersion == "" {
		errs = append(errs, field.Required(p.Child("apiVersion"), ""))
	}
	fp := p.Child("fieldPath")
	switch {
	case fs.FieldPath == "":
		errs = append(errs, field.Required(fp, ""))
	case strings.HasPrefix(fs.FieldPath, "metadata.labels['") || strings.HasPrefix(fs.FieldPath, "metadata.annotations['"):
		key, ok := strings.CutSuffix(fs.FieldPath[strings.Index(fs.FieldPath, "['")+2:], "']")
		if !ok {
			return append(errs, field.Invalid(fp, fs.FieldPath, "error converting fieldPath: unterminated subscript"))
		}
		errs = append(errs, invalidEach(fp, fs.FieldPath, content.IsLabelKey(strings.ToLower(key)))...)
	case !slices.Contains(supported, fs.FieldPath):
		errs = append(errs, field.NotSupported(fp, fs.FieldPath, supported))
	}
	return errs
}

// validateResourceFieldRef requires a supported container resource.
func validateResourceFieldRef(rf *corev1.ResourceFieldSelector, p *field.Path) field.ErrorList {
	switch {
	case rf.Resource == "":
		return field.ErrorList{field.Required(p.Child("resource"), "")}
	case slices.Contains(containerResourceFields, rf.Resource),
		strings.HasPrefix(rf.Resource, "limits.hugepages-"), strings.HasPrefix(rf.Resource, "requests.hugepages-"):
		return nil
	}
	return field.ErrorList{field.NotSupported(p.Child("resource"), rf.Resource, containerResourceFields)}
}

// validateKeySelector requires the name of a ConfigMap or Secret and a valid key.
func validateKeySelector(name, key string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if key == "" {
		return append(errs, field.Required(p.Child("key"), ""))
	}
	return append(errs, validateDataKey(p.Child("key"), key)...)
}

// validateFileKeyRef requires a volume name, a relative path and a key.
func validateFileKeyRef(r *corev1.FileKeySelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.VolumeName == "" {
		errs = append(errs, field.Required(p.Child("volumeName"), ""))
	}
	if r.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	} else {
		errs = append(errs, validateRelativePath(r.Path, p.Child("path"))...)
	}
	if r.Key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	}
	return errs
}

// validateEnvFrom requires exactly one of configMapRef and secretRef, with a name, and a valid prefix.
func validateEnvFrom(envFrom []corev1.EnvFromSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ef := range envFrom {
		ip := p.Index(i)
		if ef.Prefix != "" {
			errs = append(errs, invalidEach(ip.Child("prefix"), ef.Prefix, validation.IsRelaxedEnvVarName(ef.Prefix))...)
		}
		switch n := len(setFields(&ef)); {
		case n == 0:
			errs = append(errs, field.Invalid(ip, "", "must specify one of: `configMapRef` or `secretRef`"))
		case n > 1:
			errs = append(errs, field.Invalid(ip, "", "may not have more than one field specified at a time"))
		}
		if ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == "" {
			errs = append(errs, field.Required(ip.Child("configMapRef", "name"), ""))
		}
		if ef.SecretRef != nil && ef.SecretRef.Name == "" {
			errs = append(errs, field.Required(ip.Child("secretRef", "name"), ""))
		}
	}
	return errs
}
