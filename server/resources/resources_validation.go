package resources

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateResourceList checks a ResourceList's names (qualified) and quantities (non-negative, integral for
// extended resources).
func validateResourceList(rl corev1.ResourceList, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(rl) {
		q := rl[name]
		kp := p.Key(string(name))
		errs = append(errs, invalidEach(kp, name, content.IsLabelKey(string(name)))...)
		errs = append(errs, validateQuantity(q, kp)...)
		if isExtendedResource(name) && q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(kp, q.String(), "must be an integer"))
		}
	}
	return errs
}

// validateQuantity rejects negative quantities.
func validateQuantity(q resource.Quantity, p *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

// isExtendedResource reports whether name is outside the kubernetes.io namespace ("example.com/gpu"): such
// resources are integral and cannot be overcommitted.
func isExtendedResource(name corev1.ResourceName) bool {
	n := string(name)
	return strings.Contains(n, "/") && !strings.Contains(n, "kubernetes.io/") && !strings.HasPrefix(n, "requests.")
}

// validateResourceRequirements checks a container's (or pod's) limits and requests: standard or extended resource
// names, valid quantities, each request at most its limit, extended resources with request equal to limit.
func validateResourceRequirements(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	lp, rp := p.Child("limits"), p.Child("requests")
	errs := validateResourceList(r.Limits, lp)
	errs = append(errs, validateResourceList(r.Requests, rp)...)
	for _, rl := range []struct {
		list corev1.ResourceList
		p    *field.Path
	}{{r.Limits, lp}, {r.Requests, rp}} {
		for _, name := range sortedKeys(rl.list) {
			if !isExtendedResource(name) && !isStandardContainerResource(name) {
				errs = append(errs, field.Invalid(rl.p.Key(string(name)), name, "must be a standard resource for containers"))
			}
		}
	}
	for _, name := range sortedKeys(r.Requests) {
		req, kp := r.Requests[name], rp.Key(string(name))
		lim, hasLimit := r.Limits[name]
		switch {
		case isExtendedResource(name) && !hasLimit:
			errs = append(errs, field.Forbidden(lp, "Limit must be set for non overcommitable resources"))
		case isExtendedResource(name) && req.Cmp(lim) != 0:
			errs = append(errs, field.Invalid(kp, req.String(),
				fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
		case hasLimit && req.Cmp(lim) > 0:
			errs = append(errs, field.Invalid(kp, req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	return errs
}

// isStandardContainerResource reports whether name is cpu, memory, ephemeral-storage or a hugepages size.
func isStandardContainerResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}
