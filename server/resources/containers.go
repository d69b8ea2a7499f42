package resources

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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

// ephemeralContainerFields are the fields an ephemeral container may set (upstream's
// allowedEphemeralContainerFields). It is a list of what is allowed, so that a field new to the API is refused
// until someone decides it makes sense for a container that is never restarted and serves nothing: ports,
// probes, lifecycle hooks, resources, resize and restart policies are not here.
var ephemeralContainerFields = map[string]bool{
	"Name": true, "Image": true, "Command": true, "Args": true, "WorkingDir": true, "EnvFrom": true, "Env": true,
	"VolumeMounts": true, "VolumeDevices": true, "TerminationMessagePath": true, "TerminationMessagePolicy": true,
	"ImagePullPolicy": true, "SecurityContext": true, "Stdin": true, "StdinOnce": true, "TTY": true,
}

// validateEphemeralContainerRules forbids every field of an ephemeral container outside ephemeralContainerFields,
// and subPath mounts, whose bind mounts would outlive it until the pod ends.
func validateEphemeralContainerRules(c *corev1.Container, p *field.Path) field.ErrorList {
	const msg = "cannot be set for an Ephemeral Container"
	var errs field.ErrorList
	v := reflect.ValueOf(corev1.EphemeralContainerCommon(*c))
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if ephemeralContainerFields[f.Name] || v.Field(i).IsZero() {
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if apiequality.Semantic.DeepEqual(v.Field(i).Interface(), reflect.Zero(f.Type).Interface()) {
			continue // an empty list or map, which the API does not tell from an absent one
		}
		errs = append(errs, field.Forbidden(p.Child(name), msg))
	}
	for i, m := range c.VolumeMounts {
		if m.SubPath != "" {
			errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(i).Child("subPath"), msg))
		}
		if m.SubPathExpr != "" {
			errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(i).Child("subPathExpr"), msg))
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
