package resources

import (
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateVolumes checks volume names (DNS-1123 labels, unique) and sources, and returns the set of names.
func validateVolumes(vols []corev1.Volume, p *field.Path) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	for i := range vols {
		v, ip := &vols[i], p.Index(i)
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(ip.Child("name"), ""))
		case names[v.Name]:
			errs = append(errs, field.Duplicate(ip.Child("name"), v.Name))
		default:
			errs = append(errs, invalidEach(ip.Child("name"), v.Name, validation.IsDNS1123Label(v.Name))...)
		}
		names[v.Name] = true
		errs = append(errs, validateVolumeSource(&v.VolumeSource, ip)...)
	}
	return names, errs
}

// validateVolumeSource requires exactly one source and checks the common ones.
func validateVolumeSource(s *corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch set := setFields(s); {
	case len(set) == 0:
		return field.ErrorList{field.Required(p, "must specify a volume type")}
	case len(set) > 1:
		errs = append(errs, field.Forbidden(p.Child(set[1]), "may not specify more than 1 volume type"))
	}
	switch {
	case s.HostPath != nil:
		errs = append(errs, validateHostPath(s.HostPath, p.Child("hostPath"))...)
	case s.EmptyDir != nil && s.EmptyDir.SizeLimit != nil:
		errs = append(errs, validateQuantity(*s.EmptyDir.SizeLimit, p.Child("emptyDir", "sizeLimit"))...)
	case s.Secret != nil:
		errs = append(errs, requiredString(s.Secret.SecretName, p.Child("secret", "secretName"))...)
		errs = append(errs, validateKeyFiles(s.Secret.Items, s.Secret.DefaultMode, p.Child("secret"))...)
	case s.ConfigMap != nil:
		errs = append(errs, requiredString(s.ConfigMap.Name, p.Child("configMap", "name"))...)
		errs = append(errs, validateKeyFiles(s.ConfigMap.Items, s.ConfigMap.DefaultMode, p.Child("configMap"))...)
	case s.PersistentVolumeClaim != nil:
		errs = append(errs, requiredString(s.PersistentVolumeClaim.ClaimName, p.Child("persistentVolumeClaim", "claimName"))...)
	case s.NFS != nil:
		errs = append(errs, requiredString(s.NFS.Server, p.Child("nfs", "server"))...)
		errs = append(errs, validateAbsolutePath(s.NFS.Path, p.Child("nfs", "path"))...)
	case s.DownwardAPI != nil:
		errs = append(errs, validateFileMode(s.DownwardAPI.DefaultMode, p.Child("downwardAPI", "defaultMode"))...)
		errs = append(errs, validateDownwardAPIFiles(s.DownwardAPI.Items, p.Child("downwardAPI", "items"))...)
	case s.Projected != nil:
		errs = append(errs, validateProjected(s.Projected, p.Child("projected"))...)
	case s.CSI != nil:
		errs = append(errs, requiredString(s.CSI.Driver, p.Child("csi", "driver"))...)
	case s.Ephemeral != nil && s.Ephemeral.VolumeClaimTemplate == nil:
		errs = append(errs, field.Required(p.Child("ephemeral", "volumeClaimTemplate"), ""))
	case s.Image != nil:
		errs = append(errs, requiredString(s.Image.Reference, p.Child("image", "reference"))...)
	}
	return errs
}

// validateAbsolutePath requires an absolute path.
func validateAbsolutePath(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if !path.IsAbs(s) {
		return field.ErrorList{field.Invalid(p, s, "must be an absolute path")}
	}
	return nil
}

var hostPathTypes = []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate,
	corev1.HostPathDirectory, corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket,
	corev1.HostPathCharDev, corev1.HostPathBlockDev}

// validateHostPath requires a path and a known type.
func validateHostPath(hp *corev1.HostPathVolumeSource, p *field.Path) field.ErrorList {
	errs := requiredString(hp.Path, p.Child("path"))
	if hp.Type != nil && !slices.Contains(hostPathTypes, *hp.Type) {
		errs = append(errs, field.NotSupported(p.Child("type"), *hp.Type, hostPathTypes))
	}
	return errs
}

// validateFileMode accepts 0 through 0777.
func validateFileMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0777) {
		return field.ErrorList{field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// validateKeyFiles checks a Secret or ConfigMap volume's default mode and items (key, relative path, mode).
func validateKeyFiles(items []corev1.KeyToPath, mode *int32, p *field.Path) field.ErrorList {
	errs := validateFileMode(mode, p.Child("defaultMode"))
	for i, it := range items {
		ip := p.Child("items").Index(i)
		errs = append(errs, requiredString(it.Key, ip.Child("key"))...)
		errs = append(errs, requiredString(it.Path, ip.Child("path"))...)
		errs = append(errs, validateRelativePath(it.Path, ip.Child("path"))...)
		errs = append(errs, validateFileMode(it.Mode, ip.Child("mode"))...)
	}
	return errs
}

// validateDownwardAPIFiles requires a relative path and exactly one of fieldRef and resourceFieldRef per file.
func validateDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		ip := p.Index(i)
		errs = append(errs, requiredString(it.Path, ip.Child("path"))...)
		errs = append(errs, validateRelativePath(it.Path, ip.Child("path"))...)
		errs = append(errs, validateFileMode(it.Mode, ip.Child("mode"))...)
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			errs = append(errs, field.Invalid(ip, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case it.FieldRef != nil:
			errs = append(errs, validateObjectFieldSelector(it.FieldRef, podVolumeFieldPaths, ip.Child("fieldRef"))...)
		case it.ResourceFieldRef != nil:
			errs = append(errs, validateResourceFieldRef(it.ResourceFieldRef, ip.Child("resourceFieldRef"))...)
		default:
			errs = append(errs, field.Required(ip, "one of fieldRef and resourceFieldRef is required"))
		}
	}
	return errs
}

// validateProjected requires exactly one projection per source and checks token lifetimes (10 minutes to 2^32
// seconds) and files.
func validateProjected(pv *corev1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	errs := validateFileMode(pv.DefaultMode, p.Child("defaultMode"))
	for i := range pv.Sources {
		src, sp := &pv.Sources[i], p.Child("sources").Index(i)
		switch n := len(setFields(src)); {
		case n == 0:
			errs = append(errs, field.Required(sp, "must specify at least 1 volume type"))
		case n > 1:
			errs = append(errs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
		switch {
		case src.Secret != nil:
			errs = append(errs, validateKeyFiles(src.Secret.Items, nil, sp.Child("secret"))...)
		case src.ConfigMap != nil:
			errs = append(errs, validateKeyFiles(src.ConfigMap.Items, nil, sp.Child("configMap"))...)
		case src.DownwardAPI != nil:
			errs = append(errs, validateDownwardAPIFiles(src.DownwardAPI.Items, sp.Child("downwardAPI", "items"))...)
		case src.ServiceAccountToken != nil:
			errs = append(errs, validateTokenProjection(src.ServiceAccountToken, sp.Child("serviceAccountToken"))...)
		}
	}
	return errs
}

func validateTokenProjection(t *corev1.ServiceAccountTokenProjection, p *field.Path) field.ErrorList {
	errs := requiredString(t.Path, p.Child("path"))
	if s := t.ExpirationSeconds; s != nil && *s < 600 {
		errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *s, "may not specify a duration less than 10 minutes"))
	} else if s != nil && *s > 1<<32 {
		errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *s, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}

// validateVolumeMounts checks mounts (a known volume, a unique mount path, a relative subPath, a known
// propagation mode) and devices (a known volume, a unique device path).
func validateVolumeMounts(c *corev1.Container, volumes map[string]bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := map[string]bool{}
	for i, m := range c.VolumeMounts {
		ip := p.Child("volumeMounts").Index(i)
		errs = append(errs, validateVolumeRef(m.Name, volumes, ip.Child("name"))...)
		errs = append(errs, validateUniquePath(m.MountPath, paths, ip.Child("mountPath"))...)
		if m.SubPath != "" {
			errs = append(errs, validateRelativePath(m.SubPath, ip.Child("subPath"))...)
		}
		if m.SubPath != "" && m.SubPathExpr != "" {
			errs = append(errs, field.Invalid(ip.Child("subPathExpr"), m.SubPathExpr,
				"subPathExpr and subPath are mutually exclusive"))
		}
		if mp := m.MountPropagation; mp != nil && !slices.Contains(mountPropagationModes, *mp) {
			errs = append(errs, field.NotSupported(ip.Child("mountPropagation"), *mp, mountPropagationModes))
		}
	}
	for i, d := range c.VolumeDevices {
		ip := p.Child("volumeDevices").Index(i)
		errs = append(errs, validateVolumeRef(d.Name, volumes, ip.Child("name"))...)
		errs = append(errs, validateUniquePath(d.DevicePath, paths, ip.Child("devicePath"))...)
	}
	return errs
}

var mountPropagationModes = []corev1.MountPropagationMode{corev1.MountPropagationNone,
	corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional}

// validateVolumeRef requires the name of one of the pod's volumes.
func validateVolumeRef(name string, volumes map[string]bool, p *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "")}
	case !volumes[name]:
		return field.ErrorList{field.NotFound(p, name)}
	}
	return nil
}

// validateUniquePath requires a path not yet in seen, and records it.
func validateUniquePath(s string, seen map[string]bool, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if seen[s] {
		return field.ErrorList{field.Invalid(p, s, "must be unique")}
	}
	seen[s] = true
	return nil
}

// validateRelativePath requires a relative path without "..".
func validateRelativePath(s string, p *field.Path) field.ErrorList {
	if path.IsAbs(s) {
		return field.ErrorList{field.Invalid(p, s, "must be a relative path")}
	}
	if slices.Contains(strings.Split(strings.ReplaceAll(s, `\`, "/"), "/"), "..") {
		return field.ErrorList{field.Invalid(p, s, "must not contain '..'")}
	}
	return nil
}
