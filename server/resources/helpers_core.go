package resources

// Pod specs are one contract shared by Pods and by every workload's pod template (Deployments, Jobs, ...), so their
// defaulting and validation live here, beside the helpers the other core kinds share (resource quantities, ports,
// tolerations). pods.go adds what only Pods have: status, QoS class, update rules and field selectors.

import (
	"fmt"
	"maps"
	"math"
	"path"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// defaultPodTemplateSpec fills in the defaults Kubernetes gives a workload's pod template: those of defaultPodSpec.
// Pod-only defaults (requests from limits, enableServiceLinks, the service account, status) are not applied: they
// materialize when the controller creates the Pod.
func defaultPodTemplateSpec(t *corev1.PodTemplateSpec) {
	defaultPodSpec(&t.Spec)
}

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

// defaultPodSpec fills in the pod spec defaults shared by Pods and templates: restartPolicy Always, dnsPolicy
// ClusterFirst, an empty securityContext, terminationGracePeriodSeconds 30, schedulerName default-scheduler, and
// the defaults of every container, probe, volume and env var.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptrTo(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(&c)
		spec.EphemeralContainers[i].EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
}

// defaultContainer fills in a container's pull policy, termination message, port protocols, env field selectors,
// probes and lifecycle handlers.
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultPullPolicy is Always for an image tagged latest or untagged (and undigested), else IfNotPresent.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if image == "" || strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 && name[i+1:] != "latest" {
		return corev1.PullIfNotPresent
	}
	return corev1.PullAlways
}

// defaultProbe sets timeoutSeconds 1, periodSeconds 10, successThreshold 1, failureThreshold 3 and the HTTP
// defaults of a probe; nil is ignored.
func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
}

// defaultHTTPGet sets path "/" and scheme HTTP; nil is ignored.
func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// defaultVolume gives a source-less volume an emptyDir and fills in file modes (0644), the hostPath type and
// projected token lifetimes.
func defaultVolume(v *corev1.Volume) {
	s := &v.VolumeSource
	if len(setFields(s)) == 0 {
		s.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	switch {
	case s.Secret != nil && s.Secret.DefaultMode == nil:
		s.Secret.DefaultMode = ptrTo(corev1.SecretVolumeSourceDefaultMode)
	case s.ConfigMap != nil && s.ConfigMap.DefaultMode == nil:
		s.ConfigMap.DefaultMode = ptrTo(corev1.ConfigMapVolumeSourceDefaultMode)
	case s.HostPath != nil && s.HostPath.Type == nil:
		s.HostPath.Type = ptrTo(corev1.HostPathUnset)
	case s.DownwardAPI != nil:
		if s.DownwardAPI.DefaultMode == nil {
			s.DownwardAPI.DefaultMode = ptrTo(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		defaultDownwardAPIItems(s.DownwardAPI.Items)
	case s.Projected != nil:
		defaultProjected(s.Projected)
	}
}

func defaultProjected(p *corev1.ProjectedVolumeSource) {
	if p.DefaultMode == nil {
		p.DefaultMode = ptrTo(corev1.ProjectedVolumeSourceDefaultMode)
	}
	for i := range p.Sources {
		src := &p.Sources[i]
		if src.ServiceAccountToken != nil && src.ServiceAccountToken.ExpirationSeconds == nil {
			src.ServiceAccountToken.ExpirationSeconds = ptrTo(int64(3600))
		}
		if src.DownwardAPI != nil {
			defaultDownwardAPIItems(src.DownwardAPI.Items)
		}
	}
}

func defaultDownwardAPIItems(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

// ptrTo returns a pointer to a copy of v.
func ptrTo[T any](v T) *T { return &v }

// setFields returns the JSON names of s's non-nil pointer fields, in declaration order. s points to a struct of
// one-of members (VolumeSource, ProbeHandler, EnvVarSource, ...).
func setFields(s any) []string {
	v := reflect.ValueOf(s).Elem()
	var out []string
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			out = append(out, strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return out
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

// invalidEach turns the messages of a validation.IsX check into Invalid errors at p.
func invalidEach(p *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, value, msg))
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
	seen := map[string]bool{}
	for i, s := range sc.Sysctls {
		np := sp.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(np, ""))
		case seen[s.Name]:
			errs = append(errs, field.Duplicate(np, s.Name))
		case strings.ContainsAny(s.Name, " =") || strings.HasPrefix(s.Name, ".") || strings.HasSuffix(s.Name, "."):
			errs = append(errs, field.Invalid(np, s.Name, "must have at most 253 characters and match regex "+
				`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`))
		}
		seen[s.Name] = true
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

// validateTolerations checks each toleration: a qualified key, Exists for an empty key, no value with Exists, a
// label-value value, a known effect, and tolerationSeconds only with NoExecute.
func validateTolerations(ts []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		ip := p.Index(i)
		if t.Key != "" {
			errs = append(errs, invalidEach(ip.Child("key"), t.Key, content.IsLabelKey(t.Key))...)
		} else if t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(ip.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(ip.Child("effect"), t.Effect,
				"effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			errs = append(errs, invalidEach(ip.Child("value"), t.Value, content.IsLabelValue(t.Value))...)
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value,
					"value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, ip.Child("effect"))...)
		}
	}
	return errs
}

// validateTaintEffect accepts NoSchedule, PreferNoSchedule and NoExecute.
func validateTaintEffect(e corev1.TaintEffect, p *field.Path) field.ErrorList {
	switch e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, e, []corev1.TaintEffect{
		corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute})}
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

// validatePortNumOrName checks an int-or-string port: a number in 1-65535 or an IANA service name.
func validatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return invalidEach(p, port.StrVal, validation.IsValidPortName(port.StrVal))
	}
	return invalidEach(p, port.IntValue(), validation.IsValidPortNum(port.IntValue()))
}

// validateProtocol accepts TCP, UDP and SCTP.
func validateProtocol(proto corev1.Protocol, p *field.Path) field.ErrorList {
	switch proto {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, proto,
		[]corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP})}
}

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

// sortedKeys returns m's keys in order, so that errors and output are deterministic.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

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

// requiredString requires a non-empty value at p.
func requiredString(v string, p *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return nil
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

// validateAffinity checks node affinity selectors and pod (anti-)affinity terms. nil is valid.
func validateAffinity(a *corev1.Affinity, p *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			errs = append(errs, validateNodeSelector(r, np.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			ip := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, validateWeight(t.Weight, ip.Child("weight"))...)
			errs = append(errs, validateNodeSelectorTerm(&t.Preference, ip.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateWeight(w int32, p *field.Path) field.ErrorList {
	if w < 1 || w > 100 {
		return field.ErrorList{field.Invalid(p, w, "must be in the range 1-100")}
	}
	return nil
}

// validateNodeSelector requires at least one term.
func validateNodeSelector(ns *corev1.NodeSelector, p *field.Path) field.ErrorList {
	tp := p.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(tp, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i := range ns.NodeSelectorTerms {
		errs = append(errs, validateNodeSelectorTerm(&ns.NodeSelectorTerms[i], tp.Index(i))...)
	}
	return errs
}

// validateNodeSelectorTerm checks label requirements and field requirements (metadata.name, In or NotIn, one
// value).
func validateNodeSelectorTerm(t *corev1.NodeSelectorTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range t.MatchExpressions {
		ip := p.Child("matchExpressions").Index(i)
		errs = append(errs, invalidEach(ip.Child("key"), r.Key, content.IsLabelKey(r.Key))...)
		errs = append(errs, validateSelectorOperator(r.Operator, r.Values, ip)...)
	}
	for i, r := range t.MatchFields {
		ip := p.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(ip.Child("key"), r.Key, []string{"metadata.name"}))
		}
		if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
			errs = append(errs, field.Invalid(ip.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		if len(r.Values) != 1 {
			errs = append(errs, field.Required(ip.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	}
	return errs
}

// validateSelectorOperator checks a node selector operator against its values.
func validateSelectorOperator(op corev1.NodeSelectorOperator, values []string, p *field.Path) field.ErrorList {
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(values) == 0 {
			return field.ErrorList{field.Required(p.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'")}
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(values) > 0 {
			return field.ErrorList{field.Forbidden(p.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")}
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(values) != 1 {
			return field.ErrorList{field.Required(p.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'")}
		}
	default:
		return field.ErrorList{field.Invalid(p.Child("operator"), op, "not a valid selector operator")}
	}
	return nil
}

// validatePodAffinityTerms checks required and weighted pod (anti-)affinity terms.
func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm,
	p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range required {
		errs = append(errs, validatePodAffinityTerm(&required[i],
			p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i := range preferred {
		ip := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		errs = append(errs, validateWeight(preferred[i].Weight, ip.Child("weight"))...)
		errs = append(errs, validatePodAffinityTerm(&preferred[i].PodAffinityTerm, ip.Child("podAffinityTerm"))...)
	}
	return errs
}

// validatePodAffinityTerm requires a topology key and valid selectors and namespaces.
func validatePodAffinityTerm(t *corev1.PodAffinityTerm, p *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(t.LabelSelector, opts, p.Child("labelSelector"))
	errs = append(errs, metav1validation.ValidateLabelSelector(t.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	for i, ns := range t.Namespaces {
		errs = append(errs, invalidEach(p.Child("namespaces").Index(i), ns, validation.IsDNS1123Label(ns))...)
	}
	if t.TopologyKey == "" {
		return append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, invalidEach(p.Child("topologyKey"), t.TopologyKey, content.IsLabelKey(t.TopologyKey))...)
}

// validateTopologySpread checks each constraint: positive maxSkew, a topology key, a known whenUnsatisfiable,
// minDomains only with DoNotSchedule, and unique (topologyKey, whenUnsatisfiable) pairs.
func validateTopologySpread(cs []corev1.TopologySpreadConstraint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range cs {
		ip := p.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(ip.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(ip.Child("topologyKey"), "can not be empty"))
		} else {
			errs = append(errs, invalidEach(ip.Child("topologyKey"), c.TopologyKey, content.IsLabelKey(c.TopologyKey))...)
		}
		if w := c.WhenUnsatisfiable; w != corev1.DoNotSchedule && w != corev1.ScheduleAnyway {
			errs = append(errs, field.NotSupported(ip.Child("whenUnsatisfiable"), w,
				[]corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
		}
		if m := c.MinDomains; m != nil && *m <= 0 {
			errs = append(errs, field.Invalid(ip.Child("minDomains"), *m, "must be greater than 0"))
		} else if m != nil && c.WhenUnsatisfiable != corev1.DoNotSchedule {
			errs = append(errs, field.Invalid(ip.Child("minDomains"), *m,
				"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"))
		}
		key := fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)
		if seen[key] {
			errs = append(errs, field.Duplicate(ip, key))
		}
		seen[key] = true
		errs = append(errs, metav1validation.ValidateLabelSelector(c.LabelSelector,
			metav1validation.LabelSelectorValidationOptions{}, ip.Child("labelSelector"))...)
	}
	return errs
}
