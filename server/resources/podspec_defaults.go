package resources

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// defaultPodTemplateSpec fills in the defaults Kubernetes gives a workload's pod template: those of defaultPodSpec.
// Pod-only defaults (requests from limits, enableServiceLinks, the service account, status) are not applied: they
// materialize when the controller creates the Pod.
func defaultPodTemplateSpec(t *corev1.PodTemplateSpec) {
	defaultPodSpec(&t.Spec)
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
