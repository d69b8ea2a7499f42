package resources

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/node/util/sysctl"
)

// validatePodTemplateSpec checks a workload's pod template at p ("spec.template"): its labels, annotations and pod
// spec. Ephemeral containers are forbidden in templates. The template's restartPolicy is the caller's to restrict
// (Deployments allow only Always).
func validatePodTemplateSpec(t *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, p.Child("metadata", "labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, p.Child("metadata", "annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, p.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(p.Child("spec", "ephemeralContainers"),
			"ephemeral containers not allowed in pod template"))
	}
	return errs
}

// validatePodSpec checks a pod spec at p ("spec", "spec.template.spec"): containers, volumes, policies, scheduling
// constraints and security settings, with Kubernetes' field paths and error types. It expects a defaulted spec:
// restartPolicy, dnsPolicy, pull and termination-message policies and port protocols are required.
func validatePodSpec(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	volumes, errs := validateVolumes(spec.Volumes, p.Child("volumes"))
	errs = append(errs, validateAllContainers(spec, volumes, p)...)
	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, p.Child("restartPolicy"))...)
	errs = append(errs, validateDNS(spec, p)...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, p.Child("nodeSelector"))...)
	errs = append(errs, validateOptionalNames(spec, p)...)
	if s := spec.ActiveDeadlineSeconds; s != nil && (*s < 1 || *s > math.MaxInt32) {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *s,
			validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	errs = append(errs, validatePodSecurity(spec, p)...)
	errs = append(errs, validateTolerations(spec.Tolerations, p.Child("tolerations"))...)
	errs = append(errs, validateAffinity(spec.Affinity, p.Child("affinity"))...)
	errs = append(errs, validateTopologySpread(spec.TopologySpreadConstraints, p.Child("topologySpreadConstraints"))...)
	errs = append(errs, validateReadinessGates(spec, p)...)
	errs = append(errs, validateHostAliases(spec.HostAliases, p.Child("hostAliases"))...)
	errs = append(errs, validateResourceList(spec.Overhead, p.Child("overhead"))...)
	if spec.Resources != nil {
		errs = append(errs, validateResourceRequirements(spec.Resources, p.Child("resources"))...)
	}
	return errs
}

// validateRestartPolicy accepts Always, OnFailure and Never.
func validateRestartPolicy(rp corev1.RestartPolicy, p *field.Path) field.ErrorList {
	switch rp {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, rp, []corev1.RestartPolicy{
		corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
}

// validateOptionalNames checks the names a spec may set: service account, node, scheduler, priority class,
// runtime class (DNS subdomains), hostname and subdomain (DNS labels).
func validateOptionalNames(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	subdomains := map[string]string{"serviceAccountName": spec.ServiceAccountName, "nodeName": spec.NodeName,
		"schedulerName": spec.SchedulerName, "priorityClassName": spec.PriorityClassName}
	if spec.RuntimeClassName != nil {
		subdomains["runtimeClassName"] = *spec.RuntimeClassName
	}
	for _, name := range sortedKeys(subdomains) {
		if v := subdomains[name]; v != "" {
			errs = append(errs, invalidEach(p.Child(name), v, validation.IsDNS1123Subdomain(v))...)
		}
	}
	if spec.Hostname != "" {
		errs = append(errs, invalidEach(p.Child("hostname"), spec.Hostname, validation.IsDNS1123Label(spec.Hostname))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, invalidEach(p.Child("subdomain"), spec.Subdomain, validation.IsDNS1123Label(spec.Subdomain))...)
	}
	return errs
}

// validateDNS checks dnsPolicy and dnsConfig: policy None requires at least one nameserver.
func validateDNS(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.DNSPolicy {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone:
	case "":
		errs = append(errs, field.Required(p.Child("dnsPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), spec.DNSPolicy, []corev1.DNSPolicy{
			corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}))
	}
	cfg, cp := spec.DNSConfig, p.Child("dnsConfig")
	if spec.DNSPolicy == corev1.DNSNone && (cfg == nil || len(cfg.Nameservers) == 0) {
		return append(errs, field.Required(cp.Child("nameservers"),
			"must provide at least one DNS nameserver when `dnsPolicy` is None"))
	}
	if cfg == nil {
		return errs
	}
	if len(cfg.Nameservers) > 3 {
		errs = append(errs, field.Invalid(cp.Child("nameservers"), cfg.Nameservers, "must not have more than 3 nameservers"))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(cp.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > 32 {
		errs = append(errs, field.Invalid(cp.Child("searches"), cfg.Searches, "must not have more than 32 search paths"))
	}
	for i, s := range cfg.Searches {
		errs = append(errs, invalidEach(cp.Child("searches").Index(i), s,
			validation.IsDNS1123Subdomain(strings.TrimSuffix(s, ".")))...)
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(cp.Child("options").Index(i).Child("name"), "must not be empty"))
		}
	}
	return errs
}

// validatePodSecurity checks the pod security context (user and group IDs, sysctls) and the host namespaces.
func validatePodSecurity(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		errs = append(errs, field.Invalid(p.Child("shareProcessNamespace"), true,
			"ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	sc := spec.SecurityContext
	if sc == nil {
		return errs
	}
	sp := p.Child("securityContext")
	errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, sp)...)
	if sc.FSGroup != nil {
		errs = append(errs, invalidEach(sp.Child("fsGroup"), *sc.FSGroup, validation.IsValidGroupID(*sc.FSGroup))...)
	}
	for i, g := range sc.SupplementalGroups {
		errs = append(errs, invalidEach(sp.Child("supplementalGroups").Index(i), g, validation.IsValidGroupID(g))...)
	}
	return append(errs, validateSysctls(spec, sp.Child("sysctls"))...)
}

// sysctlMaxLength and sysctlName are Kubernetes' rules for a sysctl name: dot- or slash-separated segments of
// lower-case alphanumerics, '-' and '_' that start and end alphanumeric, 253 characters at most.
const (
	sysctlMaxLength = 253
	sysctlSegment   = `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`
)

var sysctlName = regexp.MustCompile(`^(` + sysctlSegment + `[\./])*` + sysctlSegment + `$`)

// validateSysctls checks the pod's sysctls at p as Kubernetes does: each name is required, valid and unique,
// and a sysctl of the network or IPC namespace is refused when the pod uses the node's (it would set the
// node's).
func validateSysctls(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, s := range spec.SecurityContext.Sysctls {
		np := p.Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(np, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlName.MatchString(s.Name):
			errs = append(errs, field.Invalid(np, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s",
				sysctlMaxLength, sysctlName)))
		case seen[s.Name]:
			errs = append(errs, field.Duplicate(np, s.Name))
		}
		seen[s.Name] = true
		ns, _, _ := sysctl.GetNamespace(s.Name)
		switch {
		case spec.HostNetwork && ns == sysctl.NetNamespace:
			errs = append(errs, field.Invalid(np, s.Name, "may not be specified when 'hostNetwork' is true"))
		case spec.HostIPC && ns == sysctl.IPCNamespace:
			errs = append(errs, field.Invalid(np, s.Name, "may not be specified when 'hostIPC' is true"))
		}
	}
	return errs
}

// validateIDs checks runAsUser and runAsGroup at p.
func validateIDs(user, group *int64, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		errs = append(errs, invalidEach(p.Child("runAsUser"), *user, validation.IsValidUserID(*user))...)
	}
	if group != nil {
		errs = append(errs, invalidEach(p.Child("runAsGroup"), *group, validation.IsValidGroupID(*group))...)
	}
	return errs
}

// validateReadinessGates checks condition types (qualified names) and scheduling gate names (qualified, unique).
func validateReadinessGates(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range spec.ReadinessGates {
		ct := string(g.ConditionType)
		errs = append(errs, invalidEach(p.Child("readinessGates").Index(i).Child("conditionType"), ct,
			content.IsLabelKey(ct))...)
	}
	seen := map[string]bool{}
	for i, g := range spec.SchedulingGates {
		np := p.Child("schedulingGates").Index(i).Child("name")
		errs = append(errs, invalidEach(np, g.Name, content.IsLabelKey(g.Name))...)
		if seen[g.Name] {
			errs = append(errs, field.Duplicate(np, g.Name))
		}
		seen[g.Name] = true
	}
	return errs
}

// validateHostAliases checks each alias's IP and host names.
func validateHostAliases(as []corev1.HostAlias, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range as {
		errs = append(errs, validation.IsValidIP(p.Index(i).Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			errs = append(errs, invalidEach(p.Index(i).Child("hostnames").Index(j), h, validation.IsDNS1123Subdomain(h))...)
		}
	}
	return errs
}
