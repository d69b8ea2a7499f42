package kubelet

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// The labels a sandbox and its containers carry in the runtime, as kubelet's: the kubelet finds them again by
// these after a restart.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
	// annotationTermination is the container's terminationMessagePath (for a runtime that reads it).
	annotationTermination = "io.kubernetes.container.terminationMessagePath"
)

// Back-off as kubelet's (flowcontrol.Backoff with 10 s and 5 min, for crash loops and image pulls): each period
// doubles the delay, from 10 s to 5 minutes. A container that exits is restarted at once the first time, then
// after the delay; the delay resets once a container has run for 10 minutes.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 10 * time.Minute
)

// backoff is one back-off (a container's restarts, a pod's pulls of an image), owned by its pod worker.
type backoff struct {
	delay    time.Duration // the current period's length (0: none yet)
	until    time.Time     // the current period's end
	reported bool          // the current period has been reported (its BackOff event recorded)
}

// next starts the next period at from, twice as long as the last (backoffInitial the first time, at most
// backoffMax).
func (b *backoff) next(from time.Time) {
	b.delay = min(max(2*b.delay, backoffInitial), backoffMax)
	b.until, b.reported = from.Add(b.delay), false
}

// active reports whether now falls in the current period.
func (b *backoff) active(now time.Time) bool { return now.Before(b.until) }

// report reports whether the current period is still to be reported (once per period, not at every sync).
func (b *backoff) report() bool {
	first := !b.reported
	b.reported = true
	return first
}

// crashBackoff is one container's restart back-off.
type crashBackoff struct {
	seen string // the exited container instance last accounted for
	backoff
}

// observe accounts for an exited instance once and reports when it may be restarted: at once after the first
// exit (or the first after a long run), else when the next period ends.
func (b *crashBackoff) observe(id string, started, finished time.Time) time.Time {
	if b.seen != id {
		fresh := b.seen == "" || finished.Sub(started) >= backoffReset
		b.seen = id
		if fresh {
			b.backoff = backoff{until: finished}
		} else {
			b.next(finished)
		}
	}
	return b.until
}

// instances are the runtime's containers of one pod container name, newest (highest attempt) first.
type instances []*runtimeapi.ContainerStatus

func (in instances) latest() *runtimeapi.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	return in[0]
}

func (in instances) previous() *runtimeapi.ContainerStatus {
	if len(in) < 2 {
		return nil
	}
	return in[1]
}

// podContainers reads the statuses of a sandbox's containers, grouped by container name, newest first.
func podContainers(ctx context.Context, rt interface {
	ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(context.Context, string, bool) (*runtimeapi.ContainerStatusResponse, error)
}, sandboxID string) (map[string]instances, error) {
	list, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandboxID})
	if err != nil {
		return nil, err
	}
	out := map[string]instances{}
	for _, c := range list {
		st, err := rt.ContainerStatus(ctx, c.Id, false)
		if runtime.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			// The runtime stopped answering between the two calls: a container left out here would be reported
			// as never created.
			return nil, err
		}
		name := c.Labels[labelContainerName]
		out[name] = append(out[name], st.Status)
	}
	for _, in := range out {
		slices.SortFunc(in, func(a, b *runtimeapi.ContainerStatus) int {
			return cmp.Or(cmp.Compare(b.Metadata.GetAttempt(), a.Metadata.GetAttempt()), cmp.Compare(b.CreatedAt, a.CreatedAt))
		})
	}
	return out, nil
}

// sandboxConfig is the CRI sandbox of a pod on this node: sandboxConfig's, with the pod's resolver. fallback:
// the pod asked for cluster DNS and the node has none.
func (p *Pods) sandboxConfig(pod *corev1.Pod, attempt uint32) (cfg *runtimeapi.PodSandboxConfig, fallback bool) {
	cfg = sandboxConfig(pod, attempt, p.logDir())
	r, fallback := p.cfg.DNS.ForPod(pod)
	cfg.DnsConfig = &runtimeapi.DNSConfig{Servers: r.Servers, Searches: r.Searches, Options: r.Options}
	return cfg, fallback
}

// dnsPolicy is the pod's dnsPolicy, ClusterFirst when unset.
func dnsPolicy(pod *corev1.Pod) corev1.DNSPolicy {
	if pod.Spec.DNSPolicy == "" {
		return corev1.DNSClusterFirst
	}
	return pod.Spec.DNSPolicy
}

// sandboxConfig is the CRI sandbox of a pod, without its resolver: its namespaces, security context and sysctls
// are securitycontext.go's.
func sandboxConfig(pod *corev1.Pod, attempt uint32, logDir string) *runtimeapi.PodSandboxConfig {
	labels := map[string]string{labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID)}
	for k, v := range pod.Labels {
		if _, reserved := labels[k]; !reserved {
			labels[k] = v
		}
	}
	// A pod on the host network keeps the node's hostname: the runtime shares the node's UTS namespace, where a
	// hostname cannot be set (runc refuses), as upstream's kubelet leaves it unset.
	hostname := ""
	if !pod.Spec.HostNetwork {
		hostname = podHostname(pod)
	}
	sc, sysctls := sandboxSecurityContext(pod)
	var ports []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			ports = append(ports, &runtimeapi.PortMapping{ContainerPort: p.ContainerPort, HostPort: p.HostPort,
				HostIp: p.HostIP, Protocol: runtimeapi.Protocol(runtimeapi.Protocol_value[string(p.Protocol)])})
		}
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Hostname: hostname, LogDirectory: filepath.Join(logDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		Labels: labels, Annotations: pod.Annotations, PortMappings: ports,
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "pod" + string(pod.UID), SecurityContext: sc, Sysctls: sysctls},
	}
}

// containerConfig is the CRI container of a pod container; its security context is securitycontext.go's.
func containerConfig(pod *corev1.Pod, c *corev1.Container, attempt uint32, env []*runtimeapi.KeyValue, mounts []*runtimeapi.Mount) *runtimeapi.ContainerConfig {
	res := linuxResources(c.Resources)
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: c.Image},
		Command:  expandAll(c.Command, env), Args: expandAll(c.Args, env), WorkingDir: c.WorkingDir, Envs: env, Mounts: mounts,
		Labels: map[string]string{labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID),
			labelContainerName: c.Name},
		Annotations: map[string]string{annotationTermination: c.TerminationMessagePath},
		LogPath:     filepath.Join(c.Name, strconv.FormatUint(uint64(attempt), 10)+".log"),
		Stdin:       c.Stdin, StdinOnce: c.StdinOnce, Tty: c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{Resources: res, SecurityContext: containerSecurityContext(pod, c)},
	}
}

// containerID is the ID as a pod status shows it.
func containerID(runtimeName, id string) string { return fmt.Sprintf("%s://%s", runtimeName, id) }
