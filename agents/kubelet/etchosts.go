package kubelet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The pod's /etc/hosts, managed as kubelet manages it: every container of a pod with an IP gets the same file,
// with localhost, the pod's own name and the pod's hostAliases (a pod on the host network: the node's hosts file
// and the aliases). A container that mounts a volume at /etc/hosts keeps its own.

const etcHostsPath = "/etc/hosts"

// nodeHostsFile is the node's hosts file, which pods on the host network see.
var nodeHostsFile = "/etc/hosts"

// hostsMount writes the pod's hosts file (when its content changed) and returns its mount for container c, or nil
// when c mounts its own /etc/hosts or the pod has no IP yet.
func (v volumes) hostsMount(pod *corev1.Pod, c *corev1.Container, podIP, domain string) (*runtimeapi.Mount, error) {
	if podIP == "" {
		return nil, nil
	}
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == etcHostsPath {
			return nil, nil
		}
	}
	content, err := hostsFileContent(pod, podIP, domain)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(v.podsDir, string(pod.UID), "etc-hosts")
	if old, err := os.ReadFile(file); err != nil || !bytes.Equal(old, content) {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return nil, err
		}
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, content, 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, file); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: file}, nil
}

// hostsFileContent is the pod's hosts file: kubelet's managed file, or on the host network the node's own, then
// the pod's hostAliases, one line per IP with its names separated by tabs.
func hostsFileContent(pod *corev1.Pod, podIP, domain string) ([]byte, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(nodeHostsFile)
		if err != nil {
			return nil, fmt.Errorf("read the node's hosts file: %w", err)
		}
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.Write(node)
		if len(node) > 0 && node[len(node)-1] != '\n' {
			b.WriteByte('\n')
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		hostname := podHostname(pod)
		if pod.Spec.Subdomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", podIP, hostname, pod.Spec.Subdomain, pod.Namespace, strings.TrimSuffix(domain, "."), hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", podIP, hostname)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes(), nil
}

// podHostname is the pod's hostname: spec.hostname, else its name cut to the kernel's 63 characters (without a
// trailing "-" or "."), as kubelet's.
func podHostname(pod *corev1.Pod) string {
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > 63 {
		hostname = strings.TrimRight(hostname[:63], "-.")
	}
	return hostname
}
