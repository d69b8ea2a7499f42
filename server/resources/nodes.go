package resources

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("Node"),
		Plural:     "nodes",
		ShortNames: []string{"no"},
		New:        func() runtime.Object { return &corev1.Node{} },
		NewList:    func() runtime.Object { return &corev1.NodeList{} },
		Status:     true,
		Validate:   func(obj runtime.Object) field.ErrorList { return validateNode(obj.(*corev1.Node)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateNodeUpdate(obj.(*corev1.Node), old.(*corev1.Node))
		},
		Table: &Table{Columns: nodeColumns, Cells: nodeCells},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.unschedulable": fmt.Sprint(obj.(*corev1.Node).Spec.Unschedulable)}
		},
	})
}

// validateNode checks taints (unique by key and effect), pod CIDRs and the status resource lists.
func validateNode(n *corev1.Node) field.ErrorList {
	sp := field.NewPath("spec")
	errs := validateTaints(n.Spec.Taints, sp.Child("taints"))
	errs = append(errs, validatePodCIDRs(&n.Spec, sp)...)
	st := field.NewPath("status")
	errs = append(errs, validateResourceList(n.Status.Capacity, st.Child("capacity"))...)
	errs = append(errs, validateResourceList(n.Status.Allocatable, st.Child("allocatable"))...)
	for i, a := range n.Status.Addresses {
		if a.Address == "" {
			errs = append(errs, field.Required(st.Child("addresses").Index(i).Child("address"), ""))
		}
	}
	return errs
}

// validateTaints requires a qualified key, a label-value value and a known effect per taint, each key and effect
// pair at most once.
func validateTaints(ts []corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range ts {
		ip := p.Index(i)
		errs = append(errs, invalidEach(ip.Child("key"), t.Key, content.IsLabelKey(t.Key))...)
		errs = append(errs, invalidEach(ip.Child("value"), t.Value, content.IsLabelValue(t.Value))...)
		errs = append(errs, validateTaintEffect(t.Effect, ip.Child("effect"))...)
		key := t.Key + ":" + string(t.Effect)
		if seen[key] {
			errs = append(errs, field.Duplicate(ip, t))
		}
		seen[key] = true
	}
	return errs
}

// validatePodCIDRs requires valid CIDRs, at most two, podCIDRs[0] equal to podCIDR.
func validatePodCIDRs(s *corev1.NodeSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	cp := sp.Child("podCIDRs")
	for i, c := range s.PodCIDRs {
		errs = append(errs, validation.IsValidCIDR(cp.Index(i), c)...)
	}
	if len(s.PodCIDRs) > 2 {
		errs = append(errs, field.Invalid(cp, s.PodCIDRs, "may specify no more than one CIDR for each IP family"))
	}
	if s.PodCIDR != "" && (len(s.PodCIDRs) == 0 || s.PodCIDRs[0] != s.PodCIDR) {
		errs = append(errs, field.Invalid(sp.Child("podCIDR"), s.PodCIDR, "must match the first element of `podCIDRs`"))
	}
	return errs
}

// validateNodeUpdate keeps podCIDR(s) and providerID once set.
func validateNodeUpdate(n, old *corev1.Node) field.ErrorList {
	var errs field.ErrorList
	sp := field.NewPath("spec")
	if len(old.Spec.PodCIDRs) > 0 && !slices.Equal(n.Spec.PodCIDRs, old.Spec.PodCIDRs) {
		errs = append(errs, field.Forbidden(sp.Child("podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
	} else if old.Spec.PodCIDR != "" && n.Spec.PodCIDR != old.Spec.PodCIDR {
		errs = append(errs, field.Forbidden(sp.Child("podCIDR"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	if old.Spec.ProviderID != "" && n.Spec.ProviderID != old.Spec.ProviderID {
		errs = append(errs, field.Forbidden(sp.Child("providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	return errs
}

// nodeColumns are kubectl's node columns; addresses and system info show with -o wide.
var nodeColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Status", Type: "string", Description: "The status of the node"},
	{Name: "Roles", Type: "string", Description: "The roles of the node"},
	ageColumn,
	{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
	{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
	{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
	{Name: "Container-Runtime", Type: "string", Priority: 1,
		Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
}

func nodeCells(obj runtime.Object, now time.Time) []any {
	n := obj.(*corev1.Node)
	info := n.Status.NodeInfo
	return []any{n.Name, nodeStatus(n), orNone(strings.Join(nodeRoles(n), ",")), age(n.CreationTimestamp, now),
		info.KubeletVersion, nodeAddress(n, corev1.NodeInternalIP), nodeAddress(n, corev1.NodeExternalIP),
		orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion)}
}

// nodeStatus is "Ready", "NotReady" or "Unknown" from the Ready condition, with ",SchedulingDisabled" when
// cordoned.
func nodeStatus(n *corev1.Node) string {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		status = "NotReady"
		if c.Status == corev1.ConditionTrue {
			status = "Ready"
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles are the sorted roles from node-role.kubernetes.io/<role> labels and the kubernetes.io/role label.
func nodeRoles(n *corev1.Node) []string {
	var roles []string
	for k, v := range n.Labels {
		if role, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && role != "" {
			roles = append(roles, role)
		} else if k == "kubernetes.io/role" && v != "" {
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	return slices.Compact(roles)
}

// nodeAddress is the node's first address of type t, "<none>" without one.
func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

// orUnknown is s, or "<unknown>" when empty.
func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
