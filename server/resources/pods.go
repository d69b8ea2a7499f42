package resources

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("Pod"),
		Plural:     "pods",
		ShortNames: []string{"po"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.Pod{} },
		NewList:    func() runtime.Object { return &corev1.PodList{} },
		Status:     true,
		Generation: true,
		Default:    func(obj runtime.Object) { defaultPod(obj.(*corev1.Pod)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validatePodSpec(&obj.(*corev1.Pod).Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validatePodUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
		},
		Table:  &Table{Columns: podColumns, Cells: podCells},
		Fields: podFields,
	})
}

// defaultPod applies the pod spec defaults plus those only Pods get: host ports of a host-network pod default to
// the container ports, requests default to limits, service links are enabled, the service account is "default" (as the ServiceAccount admission plugin does; serviceAccount
// mirrors serviceAccountName), and an unset status becomes phase Pending with the computed QoS class.
// Tolerations for not-ready and unreachable nodes are left to admission.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	defaultPodSpec(spec)
	if spec.HostNetwork {
		defaultHostNetworkPorts(spec.InitContainers)
		defaultHostNetworkPorts(spec.Containers)
	}
	for i := range spec.InitContainers {
		defaultRequestsFromLimits(&spec.InitContainers[i].Resources)
	}
	for i := range spec.Containers {
		defaultRequestsFromLimits(&spec.Containers[i].Resources)
	}
	if spec.Resources != nil {
		defaultRequestsFromLimits(spec.Resources)
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptrTo(corev1.DefaultEnableServiceLinks)
	}
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = "default"
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = podQOSClass(spec)
	}
}

// defaultHostNetworkPorts sets each unset hostPort to its containerPort, as a host-network pod uses the host's ports.
func defaultHostNetworkPorts(cs []corev1.Container) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
			}
		}
	}
}

// defaultRequestsFromLimits sets each missing request to its limit.
func defaultRequestsFromLimits(r *corev1.ResourceRequirements) {
	for name, lim := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = lim.DeepCopy()
	}
}

// podQOSClass computes a pod's QoS class from its cpu and memory: BestEffort without any request or limit,
// Guaranteed when every container limits both and requests equal limits, else Burstable. Pod-level resources,
// when they set cpu or memory, replace the containers'.
func podQOSClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	var all []corev1.ResourceRequirements
	if r := spec.Resources; r != nil && hasComputeResources(r.Requests, r.Limits) {
		all = append(all, *r)
	} else {
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			all = append(all, c.Resources)
		}
	}
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	for _, r := range all {
		addComputeResources(requests, r.Requests)
		if n := addComputeResources(limits, r.Limits); n < 2 {
			guaranteed = false
		}
	}
	switch {
	case len(requests) == 0 && len(limits) == 0:
		return corev1.PodQOSBestEffort
	case guaranteed && apiequality.Semantic.DeepEqual(requests, limits):
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// hasComputeResources reports whether any list sets a non-zero cpu or memory.
func hasComputeResources(lists ...corev1.ResourceList) bool {
	for _, l := range lists {
		if addComputeResources(corev1.ResourceList{}, l) > 0 {
			return true
		}
	}
	return false
}

// addComputeResources adds the non-zero cpu and memory of from into sum and returns how many it found.
func addComputeResources(sum, from corev1.ResourceList) int {
	n := 0
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := from[name]
		if !ok || q.IsZero() {
			continue
		}
		n++
		total := sum[name]
		if total.Format == "" {
			total = resource.Quantity{Format: q.Format}
		}
		total.Add(q)
		sum[name] = total
	}
	return n
}

// podUpdatableFields is how Kubernetes words which pod spec fields an update may change.
const podUpdatableFields = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to " +
	"existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate enforces pod spec immutability: only container and init container images,
// activeDeadlineSeconds (lowered, never unset), tolerations (additions, or new tolerationSeconds),
// terminationGracePeriodSeconds, a first nodeName, removed scheduling gates and added ephemeral containers may
// change.
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	sp := field.NewPath("spec")
	errs := validateActiveDeadlineUpdate(pod.Spec.ActiveDeadlineSeconds, old.Spec.ActiveDeadlineSeconds,
		sp.Child("activeDeadlineSeconds"))
	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, sp.Child("tolerations"))...)
	errs = append(errs, validateEphemeralContainersUpdate(pod.Spec.EphemeralContainers, old.Spec.EphemeralContainers,
		sp.Child("ephemeralContainers"))...)
	if changed := changedPodSpecFields(mungePodSpec(&pod.Spec, &old.Spec), &old.Spec); len(changed) > 0 {
		errs = append(errs, field.Forbidden(sp, podUpdatableFields+"\nchanged: "+strings.Join(changed, ", ")))
	}
	return errs
}

// mungePodSpec returns a copy of spec with every field an update may change set back to old's value.
func mungePodSpec(spec, old *corev1.PodSpec) *corev1.PodSpec {
	m := spec.DeepCopy()
	if len(m.Containers) == len(old.Containers) {
		for i := range m.Containers {
			m.Containers[i].Image = old.Containers[i].Image
		}
	}
	if len(m.InitContainers) == len(old.InitContainers) {
		for i := range m.InitContainers {
			m.InitContainers[i].Image = old.InitContainers[i].Image
		}
	}
	m.ActiveDeadlineSeconds = old.ActiveDeadlineSeconds
	m.Tolerations = old.Tolerations
	m.TerminationGracePeriodSeconds = old.TerminationGracePeriodSeconds
	m.EphemeralContainers = old.EphemeralContainers
	if old.NodeName == "" {
		m.NodeName = ""
	}
	if isSubset(m.SchedulingGates, old.SchedulingGates) {
		m.SchedulingGates = old.SchedulingGates
	}
	return m
}

// isSubset reports whether every element of a is in b.
func isSubset[T comparable](a, b []T) bool {
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return true
}

// changedPodSpecFields returns "spec.<json name>" for each top-level field that differs.
func changedPodSpecFields(spec, old *corev1.PodSpec) []string {
	var out []string
	a, b, t := reflect.ValueOf(spec).Elem(), reflect.ValueOf(old).Elem(), reflect.TypeOf(*spec)
	for i := 0; i < t.NumField(); i++ {
		if !apiequality.Semantic.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			out = append(out, "spec."+strings.Split(t.Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return out
}

// validateActiveDeadlineUpdate allows activeDeadlineSeconds to be set or lowered, never raised or unset.
func validateActiveDeadlineUpdate(v, old *int64, p *field.Path) field.ErrorList {
	switch {
	case v == nil && old != nil:
		return field.ErrorList{field.Invalid(p, v, "must not update from a positive integer to nil value")}
	case v != nil && old != nil && *v > *old:
		return field.ErrorList{field.Invalid(p, *v, "must be less than or equal to previous value")}
	}
	return nil
}

// validateOnlyAddedTolerations requires every old toleration to remain, only its tolerationSeconds changed.
func validateOnlyAddedTolerations(ts, old []corev1.Toleration, p *field.Path) field.ErrorList {
	for _, o := range old {
		if !slices.ContainsFunc(ts, func(t corev1.Toleration) bool {
			o.TolerationSeconds = t.TolerationSeconds
			return apiequality.Semantic.DeepEqual(o, t)
		}) {
			return field.ErrorList{field.Forbidden(p, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

// validateEphemeralContainersUpdate lets ephemeral containers be added, never changed or removed.
func validateEphemeralContainersUpdate(ecs, old []corev1.EphemeralContainer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, o := range old {
		i := slices.IndexFunc(ecs, func(ec corev1.EphemeralContainer) bool { return ec.Name == o.Name })
		switch {
		case i < 0:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("existing ephemeral containers %q may not be removed", o.Name)))
		case !apiequality.Semantic.DeepEqual(ecs[i], o):
			errs = append(errs, field.Forbidden(p.Index(i), fmt.Sprintf("existing ephemeral containers %q may not be changed", o.Name)))
		}
	}
	return errs
}

// podFields are the pod field selectors Kubernetes supports beyond metadata.
func podFields(obj runtime.Object) fields.Set {
	pod := obj.(*corev1.Pod)
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP(&pod.Status),
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// podIP is the pod's primary IP ("" before one is assigned).
func podIP(s *corev1.PodStatus) string {
	if len(s.PodIPs) > 0 {
		return s.PodIPs[0].IP
	}
	return s.PodIP
}

// Containers: the rules every container list of a pod spec follows, used by validatePodSpec.

// podContainerKind tells the three container lists of a pod apart: their rules differ.
type podContainerKind int

const (
	regularContainer podContainerKind = iota
	initContainer
	ephemeralContainer
)

// podContainerCheck carries what validating one container needs from its siblings: the pod's volume names, the
// container names and host ports taken so far (names are unique across all three lists).
type podContainerCheck struct {
	volumes   map[string]bool
	names     map[string]bool
	hostPorts map[string]bool
}

// validateAllContainers checks init, regular and ephemeral containers; at least one regular container is required.
func validateAllContainers(spec *corev1.PodSpec, volumes map[string]bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	chk := &podContainerCheck{volumes: volumes, names: map[string]bool{}, hostPorts: map[string]bool{}}
	for i := range spec.InitContainers {
		errs = append(errs, chk.validate(&spec.InitContainers[i], initContainer, p.Child("initContainers").Index(i))...)
	}
	for i := range spec.Containers {
		errs = append(errs, chk.validate(&spec.Containers[i], regularContainer, p.Child("containers").Index(i))...)
	}
	for i := range spec.EphemeralContainers {
		errs = append(errs, validateEphemeralContainer(spec, i, chk, p.Child("ephemeralContainers").Index(i))...)
	}
	if spec.HostNetwork {
		errs = append(errs, validateHostNetworkPorts(spec, p)...)
	}
	return errs
}

// validateEphemeralContainer checks spec.ephemeralContainers[i]: a container whose target, when set, names one of
// the pod's containers.
func validateEphemeralContainer(spec *corev1.PodSpec, i int, chk *podContainerCheck, p *field.Path) field.ErrorList {
	ec := spec.EphemeralContainers[i]
	c := corev1.Container(ec.EphemeralContainerCommon)
	errs := chk.validate(&c, ephemeralContainer, p)
	named := func(c corev1.Container) bool { return c.Name == ec.TargetContainerName }
	if ec.TargetContainerName != "" && !slices.ContainsFunc(spec.Containers, named) &&
		!slices.ContainsFunc(spec.InitContainers, named) {
		errs = append(errs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
	}
	return errs
}

// validateHostNetworkPorts requires hostPort == containerPort in a host-network pod.
func validateHostNetworkPorts(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		cs   []corev1.Container
		name string
	}{{spec.InitContainers, "initContainers"}, {spec.Containers, "containers"}} {
		for i, c := range list.cs {
			for j, port := range c.Ports {
				if port.HostPort != port.ContainerPort {
					errs = append(errs, field.Invalid(p.Child(list.name).Index(i).Child("ports").Index(j).Child("containerPort"),
						port.ContainerPort, "must match `hostPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	return errs
}

// validate checks one container at p and records its name and host ports.
func (chk *podContainerCheck) validate(c *corev1.Container, kind podContainerKind, p *field.Path) field.ErrorList {
	errs := chk.validateName(c.Name, p.Child("name"))
	errs = append(errs, validateImage(c, p)...)
	errs = append(errs, validateContainerPolicies(c, p)...)
	errs = append(errs, validateContainerPorts(c.Ports, chk.hostPorts, p.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, p.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c, chk.volumes, p)...)
	errs = append(errs, validateResourceRequirements(&c.Resources, p.Child("resources"))...)
	errs = append(errs, validateProbe(c.LivenessProbe, p.Child("livenessProbe"), true)...)
	errs = append(errs, validateProbe(c.ReadinessProbe, p.Child("readinessProbe"), false)...)
	errs = append(errs, validateProbe(c.StartupProbe, p.Child("startupProbe"), true)...)
	errs = append(errs, validateLifecycle(c.Lifecycle, p.Child("lifecycle"))...)
	errs = append(errs, validateContainerSecurity(c.SecurityContext, p.Child("securityContext"))...)
	switch kind {
	case initContainer:
		errs = append(errs, validateInitContainerRules(c, p)...)
	case ephemeralContainer:
		errs = append(errs, validateEphemeralContainerRules(c, p)...)
	default:
		errs = append(errs, validateContainerRestartPolicy(c.RestartPolicy, p.Child("restartPolicy"),
			corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever)...)
	}
	return errs
}

// validateName requires a DNS-1123 label unique among the pod's containers.
func (chk *podContainerCheck) validateName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	errs := invalidEach(p, name, validation.IsDNS1123Label(name))
	if chk.names[name] {
		errs = append(errs, field.Duplicate(p, name))
	}
	chk.names[name] = true
	return errs
}

// validateImage requires an image without surrounding whitespace.
func validateImage(c *corev1.Container, p *field.Path) field.ErrorList {
	switch {
	case c.Image == "":
		return field.ErrorList{field.Required(p.Child("image"), "")}
	case strings.TrimSpace(c.Image) != c.Image:
		return field.ErrorList{field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace")}
	}
	return nil
}

// validateContainerPolicies checks imagePullPolicy and terminationMessagePolicy.
func validateContainerPolicies(c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	case "":
		errs = append(errs, field.Required(p.Child("imagePullPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(p.Child("terminationMessagePolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}
	return errs
}

// validateContainerRestartPolicy accepts an unset policy or one of allowed.
func validateContainerRestartPolicy(rp *corev1.ContainerRestartPolicy, p *field.Path,
	allowed ...corev1.ContainerRestartPolicy) field.ErrorList {
	if rp == nil || slices.Contains(allowed, *rp) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, *rp, allowed)}
}

// validateInitContainerRules allows restartPolicy Always only (a sidecar); plain init containers may not have
// probes or lifecycle hooks.
func validateInitContainerRules(c *corev1.Container, p *field.Path) field.ErrorList {
	errs := validateContainerRestartPolicy(c.RestartPolicy, p.Child("restartPolicy"), corev1.ContainerRestartPolicyAlways)
	if c.RestartPolicy != nil {
		return errs
	}
	const msg = "may not be set for init containers without restartPolicy=Always"
	for _, f := range []struct {
		name string
		set  bool
	}{{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}} {
		if f.set {
			errs = append(errs, field.Forbidden(p.Child(f.name), msg))
		}
	}
	return errs
}

// validateEphemeralContainerRules forbids what an ephemeral container cannot have: ports, probes, lifecycle hooks,
// resources and a restart policy.
func validateEphemeralContainerRules(c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	const msg = "cannot be set for an Ephemeral Container"
	for _, f := range []struct {
		name string
		set  bool
	}{{"ports", len(c.Ports) > 0}, {"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil},
		{"lifecycle", c.Lifecycle != nil}, {"restartPolicy", c.RestartPolicy != nil},
		{"resources", len(c.Resources.Limits)+len(c.Resources.Requests)+len(c.Resources.Claims) > 0}} {
		if f.set {
			errs = append(errs, field.Forbidden(p.Child(f.name), msg))
		}
	}
	return errs
}

// validateContainerPorts checks ports: names unique in the container, valid numbers, protocols and host IPs, and
// host ports unique (by IP, protocol and port) across the pod.
func validateContainerPorts(ports []corev1.ContainerPort, hostPorts map[string]bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, port := range ports {
		ip := p.Index(i)
		if port.Name != "" {
			errs = append(errs, invalidEach(ip.Child("name"), port.Name, validation.IsValidPortName(port.Name))...)
			if names[port.Name] {
				errs = append(errs, field.Duplicate(ip.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(ip.Child("containerPort"), ""))
		} else {
			errs = append(errs, invalidEach(ip.Child("containerPort"), port.ContainerPort,
				validation.IsValidPortNum(int(port.ContainerPort)))...)
		}
		errs = append(errs, validateProtocol(port.Protocol, ip.Child("protocol"))...)
		if port.HostIP != "" {
			errs = append(errs, validation.IsValidIP(ip.Child("hostIP"), port.HostIP)...)
		}
		if port.HostPort == 0 {
			continue
		}
		errs = append(errs, invalidEach(ip.Child("hostPort"), port.HostPort, validation.IsValidPortNum(int(port.HostPort)))...)
		key := fmt.Sprintf("%s/%s/%d", port.HostIP, port.Protocol, port.HostPort)
		if hostPorts[key] {
			errs = append(errs, field.Duplicate(ip.Child("hostPort"), key))
		}
		hostPorts[key] = true
	}
	return errs
}

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

// validateProbe checks a probe: one handler, non-negative numbers, successThreshold 1 for liveness and startup
// probes, a positive terminationGracePeriodSeconds only on those. nil is valid.
func validateProbe(pr *corev1.Probe, p *field.Path, liveness bool) field.ErrorList {
	if pr == nil {
		return nil
	}
	h := &pr.ProbeHandler
	errs := validateHandler(setFields(h), h.Exec, h.HTTPGet, h.TCPSocket, p)
	if h.GRPC != nil {
		errs = append(errs, invalidEach(p.Child("grpc", "port"), h.GRPC.Port, validation.IsValidPortNum(int(h.GRPC.Port)))...)
	}
	for _, n := range []struct {
		name string
		v    int32
	}{{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds},
		{"periodSeconds", pr.PeriodSeconds}, {"successThreshold", pr.SuccessThreshold},
		{"failureThreshold", pr.FailureThreshold}} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(n.v), p.Child(n.name))...)
	}
	if liveness && pr.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil && !liveness {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
	} else if g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return errs
}

// validateLifecycle checks postStart and preStop handlers. nil is valid.
func validateLifecycle(l *corev1.Lifecycle, p *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	for _, h := range []struct {
		name string
		h    *corev1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		if h.h == nil {
			continue
		}
		hp := p.Child(h.name)
		errs = append(errs, validateHandler(setFields(h.h), h.h.Exec, h.h.HTTPGet, h.h.TCPSocket, hp)...)
		if s := h.h.Sleep; s != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(s.Seconds, hp.Child("sleep", "seconds"))...)
		}
	}
	return errs
}

// validateHandler requires exactly one of the handler fields set (their JSON names) and checks the common ones.
func validateHandler(set []string, exec *corev1.ExecAction, get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction,
	p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(set) == 0:
		errs = append(errs, field.Required(p, "must specify a handler type"))
	case len(set) > 1:
		errs = append(errs, field.Forbidden(p.Child(set[1]), "may not specify more than 1 handler type"))
	}
	if exec != nil && len(exec.Command) == 0 {
		errs = append(errs, field.Required(p.Child("exec", "command"), ""))
	}
	if get != nil {
		errs = append(errs, validateHTTPGet(get, p.Child("httpGet"))...)
	}
	if tcp != nil {
		errs = append(errs, validatePortNumOrName(tcp.Port, p.Child("tcpSocket", "port"))...)
	}
	return errs
}

// validateHTTPGet requires a path, a valid port, scheme HTTP or HTTPS and valid header names.
func validateHTTPGet(get *corev1.HTTPGetAction, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if get.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, validatePortNumOrName(get.Port, p.Child("port"))...)
	if s := get.Scheme; s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(p.Child("scheme"), s, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
	}
	for i, h := range get.HTTPHeaders {
		errs = append(errs, invalidEach(p.Child("httpHeaders").Index(i).Child("name"), h.Name,
			validation.IsHTTPHeaderName(h.Name))...)
	}
	return errs
}

// validateContainerSecurity checks IDs, procMount and the combinations Kubernetes refuses: privileged or
// CAP_SYS_ADMIN without privilege escalation. nil is valid.
func validateContainerSecurity(sc *corev1.SecurityContext, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateIDs(sc.RunAsUser, sc.RunAsGroup, p)
	if pm := sc.ProcMount; pm != nil && *pm != corev1.DefaultProcMount && *pm != corev1.UnmaskedProcMount {
		errs = append(errs, field.NotSupported(p.Child("procMount"), *pm,
			[]corev1.ProcMountType{corev1.DefaultProcMount, corev1.UnmaskedProcMount}))
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		return errs
	}
	ap := p.Child("allowPrivilegeEscalation")
	if sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Invalid(ap, false, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
	}
	if sc.Capabilities != nil && slices.ContainsFunc(sc.Capabilities.Add, func(c corev1.Capability) bool {
		return c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN"
	}) {
		errs = append(errs, field.Invalid(ap, false, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
	}
	return errs
}
