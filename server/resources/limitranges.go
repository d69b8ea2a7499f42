package resources

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("LimitRange"),
		Plural:     "limitranges",
		ShortNames: []string{"limits"},
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.LimitRange{} },
		NewList:    func() runtime.Object { return &corev1.LimitRangeList{} },
		Default:    func(obj runtime.Object) { defaultLimitRange(obj.(*corev1.LimitRange)) },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateLimitRange(obj.(*corev1.LimitRange)) },
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn, {Name: "Created At", Type: "date",
				Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}},
			Cells: func(obj runtime.Object, _ time.Time) []any {
				lr := obj.(*corev1.LimitRange)
				return []any{lr.Name, lr.CreationTimestamp.UTC().Format(time.RFC3339)}
			},
		},
	})
}

// defaultLimitRange fills in Container items: a missing default limit is the max, a missing default request is
// the default limit, else the min.
func defaultLimitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		it := &lr.Spec.Limits[i]
		if it.Type != corev1.LimitTypeContainer {
			continue
		}
		it.Default = fillMissing(it.Default, it.Max)
		it.DefaultRequest = fillMissing(it.DefaultRequest, it.Default)
		it.DefaultRequest = fillMissing(it.DefaultRequest, it.Min)
	}
}

// fillMissing copies into dst each resource of from that dst lacks, allocating dst only when needed.
func fillMissing(dst, from corev1.ResourceList) corev1.ResourceList {
	for name, q := range from {
		if _, ok := dst[name]; ok {
			continue
		}
		if dst == nil {
			dst = corev1.ResourceList{}
		}
		dst[name] = q.DeepCopy()
	}
	return dst
}

var limitTypes = []corev1.LimitType{corev1.LimitTypePod, corev1.LimitTypeContainer, corev1.LimitTypePersistentVolumeClaim}

// validateLimitRange checks each item: a known type used once, valid resource lists, no defaults for Pod items,
// and min <= defaultRequest <= default <= max, maxLimitRequestRatio at least 1 and at most max/min.
func validateLimitRange(lr *corev1.LimitRange) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.LimitType]bool{}
	for i := range lr.Spec.Limits {
		it, ip := &lr.Spec.Limits[i], field.NewPath("spec", "limits").Index(i)
		switch {
		case it.Type == "":
			errs = append(errs, field.Required(ip.Child("type"), ""))
		case !slices.Contains(limitTypes, it.Type):
			errs = append(errs, field.NotSupported(ip.Child("type"), it.Type, limitTypes))
		case seen[it.Type]:
			errs = append(errs, field.Duplicate(ip.Child("type"), it.Type))
		}
		seen[it.Type] = true
		for _, l := range []struct {
			name string
			rl   corev1.ResourceList
		}{{"max", it.Max}, {"min", it.Min}, {"default", it.Default}, {"defaultRequest", it.DefaultRequest},
			{"maxLimitRequestRatio", it.MaxLimitRequestRatio}} {
			errs = append(errs, validateResourceList(l.rl, ip.Child(l.name))...)
		}
		if it.Type == corev1.LimitTypePod && (len(it.Default) > 0 || len(it.DefaultRequest) > 0) {
			errs = append(errs, field.Forbidden(ip.Child("default"), "may not be specified when `type` is 'Pod'"))
		}
		errs = append(errs, validateLimitOrder(it, ip)...)
	}
	return errs
}

// validateLimitOrder checks, per resource, min <= defaultRequest <= default <= max and the ratio bounds.
func validateLimitOrder(it *corev1.LimitRangeItem, ip *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[corev1.ResourceName]bool{}
	for _, rl := range []corev1.ResourceList{it.Max, it.Min, it.Default, it.DefaultRequest, it.MaxLimitRequestRatio} {
		for n := range rl {
			names[n] = true
		}
	}
	for _, name := range sortedKeys(names) {
		get := func(rl corev1.ResourceList) (resource.Quantity, bool) { q, ok := rl[name]; return q, ok }
		maxQ, hasMax := get(it.Max)
		minQ, hasMin := get(it.Min)
		defQ, hasDef := get(it.Default)
		reqQ, hasReq := get(it.DefaultRequest)
		ratio, hasRatio := get(it.MaxLimitRequestRatio)
		key := string(name)
		bad := func(child string, q resource.Quantity, format string, a, b resource.Quantity) {
			errs = append(errs, field.Invalid(ip.Child(child).Key(key), q.String(), fmt.Sprintf(format, a.String(), b.String())))
		}
		if hasMin && hasMax && minQ.Cmp(maxQ) > 0 {
			bad("min", minQ, "min value %s is greater than max value %s", minQ, maxQ)
		}
		if hasReq && hasMin && minQ.Cmp(reqQ) > 0 {
			bad("defaultRequest", reqQ, "min value %s is greater than default request value %s", minQ, reqQ)
		}
		if hasReq && hasMax && reqQ.Cmp(maxQ) > 0 {
			bad("defaultRequest", reqQ, "default request value %s is greater than max value %s", reqQ, maxQ)
		}
		if hasReq && hasDef && reqQ.Cmp(defQ) > 0 {
			bad("defaultRequest", reqQ, "default request value %s is greater than default limit value %s", reqQ, defQ)
		}
		if hasDef && hasMin && minQ.Cmp(defQ) > 0 {
			bad("default", defQ, "min value %s is greater than default value %s", minQ, defQ)
		}
		if hasDef && hasMax && defQ.Cmp(maxQ) > 0 {
			bad("default", defQ, "default value %s is greater than max value %s", defQ, maxQ)
		}
		if hasRatio {
			errs = append(errs, validateLimitRatio(ratio, minQ, maxQ, hasMin && hasMax, ip.Child("maxLimitRequestRatio").Key(key))...)
		}
	}
	return errs
}

// validateLimitRatio requires a ratio of at least 1 and, with min and max, at most max/min.
func validateLimitRatio(ratio, minQ, maxQ resource.Quantity, bounded bool, p *field.Path) field.ErrorList {
	if ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
		return field.ErrorList{field.Invalid(p, ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String()))}
	}
	if bounded && minQ.MilliValue() > 0 {
		maxRatio := float64(maxQ.MilliValue()) / float64(minQ.MilliValue())
		if float64(ratio.MilliValue())/1000 > maxRatio {
			return field.ErrorList{field.Invalid(p, ratio.String(),
				fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), maxRatio))}
		}
	}
	return nil
}
