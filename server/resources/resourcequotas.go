package resources

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("ResourceQuota"),
		Plural:     "resourcequotas",
		ShortNames: []string{"quota"},
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.ResourceQuota{} },
		NewList:    func() runtime.Object { return &corev1.ResourceQuotaList{} },
		Status:     true,
		Validate:   func(obj runtime.Object) field.ErrorList { return validateResourceQuota(obj.(*corev1.ResourceQuota)) },
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn, ageColumn,
				{Name: "Request", Type: "string",
					Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
				{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a " +
					"container may use independent of contention on the node."}},
			Cells: func(obj runtime.Object, now time.Time) []any {
				q := obj.(*corev1.ResourceQuota)
				request, limit := quotaUsage(&q.Status)
				return []any{q.Name, age(q.CreationTimestamp, now), request, limit}
			},
		},
	})
}

// standardQuotaResources are the quota resource names outside a domain; others must be qualified
// ("count/deployments.apps", "example.com/gpu").
var standardQuotaResources = []corev1.ResourceName{
	corev1.ResourcePods, corev1.ResourceServices, corev1.ResourceReplicationControllers, corev1.ResourceQuotas,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers, corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceEphemeralStorage, corev1.ResourceStorage, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
	corev1.ResourceRequestsStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
}

// integerQuotaResources count objects: their quantities must be whole numbers.
var integerQuotaResources = standardQuotaResources[:9]

var quotaScopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating,
	corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeBestEffort,
	corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopePriorityClass,
	corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ResourceQuotaScopeVolumeAttributesClass}

// validateResourceQuota checks spec.hard, status.hard and status.used (known or qualified names, non-negative,
// whole numbers for object counts), the scopes and the scope selector.
func validateResourceQuota(q *corev1.ResourceQuota) field.ErrorList {
	errs := validateQuotaResources(q.Spec.Hard, field.NewPath("spec", "hard"))
	errs = append(errs, validateQuotaResources(q.Status.Hard, field.NewPath("status", "hard"))...)
	errs = append(errs, validateQuotaResources(q.Status.Used, field.NewPath("status", "used"))...)
	errs = append(errs, validateQuotaScopes(q.Spec.Scopes, field.NewPath("spec", "scopes"))...)
	if sel := q.Spec.ScopeSelector; sel != nil {
		errs = append(errs, validateScopeSelector(sel, field.NewPath("spec", "scopeSelector"))...)
	}
	return errs
}

// validateQuotaResources checks a quota's resource names and quantities.
func validateQuotaResources(rl corev1.ResourceList, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(rl) {
		kp, q := p.Key(string(name)), rl[name]
		n := string(name)
		errs = append(errs, invalidEach(kp, n, content.IsLabelKey(n))...)
		if !strings.Contains(n, "/") && !slices.Contains(standardQuotaResources, name) &&
			!strings.HasPrefix(n, corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(n, corev1.ResourceRequestsHugePagesPrefix) {
			errs = append(errs, field.Invalid(kp, n, "must be a standard resource for quota"))
		}
		errs = append(errs, validateQuantity(q, kp)...)
		integer := slices.Contains(integerQuotaResources, name) || strings.HasPrefix(n, "count/") || isExtendedResource(name)
		if integer && q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(kp, q.String(), "must be an integer"))
		}
	}
	return errs
}

// validateQuotaScopes accepts known, non-conflicting scopes.
func validateQuotaScopes(scopes []corev1.ResourceQuotaScope, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range scopes {
		if !slices.Contains(quotaScopes, s) {
			errs = append(errs, field.NotSupported(p.Index(i), s, quotaScopes))
		}
	}
	for _, pair := range [][2]corev1.ResourceQuotaScope{
		{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating},
		{corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort}} {
		if slices.Contains(scopes, pair[0]) && slices.Contains(scopes, pair[1]) {
			errs = append(errs, field.Invalid(p, scopes, "conflicting scopes"))
		}
	}
	return errs
}

// validateScopeSelector checks each requirement's scope, operator and values.
func validateScopeSelector(sel *corev1.ScopeSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range sel.MatchExpressions {
		ip := p.Child("matchExpressions").Index(i)
		if !slices.Contains(quotaScopes, r.ScopeName) {
			errs = append(errs, field.NotSupported(ip.Child("scopeName"), r.ScopeName, quotaScopes))
		}
		switch r.Operator {
		case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(ip.Child("values"),
					"must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
			}
		case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
			if len(r.Values) != 0 {
				errs = append(errs, field.Invalid(ip.Child("values"), r.Values,
					"must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
			}
		default:
			errs = append(errs, field.Invalid(ip.Child("operator"), r.Operator, "not a valid selector operator"))
		}
	}
	return errs
}

// quotaUsage renders the REQUEST and LIMIT cells: "name: used/hard" for each hard resource, limits.* in LIMIT.
func quotaUsage(s *corev1.ResourceQuotaStatus) (request, limit string) {
	var requests, limits []string
	for _, name := range sortedKeys(s.Hard) {
		used, hard := s.Used[name], s.Hard[name]
		cell := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if strings.HasPrefix(string(name), "limits.") {
			limits = append(limits, cell)
		} else {
			requests = append(requests, cell)
		}
	}
	return strings.Join(requests, ", "), strings.Join(limits, ", ")
}
