package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHostsFile: a pod's containers get kubelet's managed /etc/hosts (localhost, the pod's name — its FQDN with a
// subdomain — and its hostAliases); a pod on the host network gets the node's file and its aliases; a container
// mounting its own /etc/hosts, or a pod without an IP yet, gets none.
func TestHostsFile(t *testing.T) {
	v := volumes{podsDir: t.TempDir()}
	aliases := []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}, {IP: "::2", Hostnames: []string{"six"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1"},
		Spec: corev1.PodSpec{HostAliases: aliases, Containers: []corev1.Container{{Name: "app"}}}}
	read := func(pod *corev1.Pod, podIP string) string {
		t.Helper()
		m, err := v.hostsMount(pod, &pod.Spec.Containers[0], podIP, "cluster.local")
		if err != nil || m == nil {
			t.Fatalf("hostsMount: %v %v", m, err)
		}
		if m.ContainerPath != "/etc/hosts" || m.Readonly {
			t.Errorf("mount %+v", m)
		}
		b, err := os.ReadFile(m.HostPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
		"10.244.1.7\tweb\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n::2\tsix\n"
	if got := read(pod, "10.244.1.7"); got != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", got, want)
	}

	sub := pod.DeepCopy()
	sub.UID, sub.Spec.Hostname, sub.Spec.Subdomain, sub.Spec.HostAliases = "u2", "db-0", "db", nil
	if got, want := read(sub, "10.244.1.8"), "fe00::2\tip6-allrouters\n10.244.1.8\tdb-0.db.shop.svc.cluster.local\tdb-0\n"; !strings.HasSuffix(got, want) {
		t.Errorf("hosts file with a subdomain:\n%s\nwant it to end with:\n%s", got, want)
	}

	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1 localhost\n192.168.250.2 node-a"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := nodeHostsFile
	nodeHostsFile = nodeHosts
	t.Cleanup(func() { nodeHostsFile = old })
	host := pod.DeepCopy()
	host.UID, host.Spec.HostNetwork = "u3", true
	want = "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.168.250.2 node-a\n" +
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n::2\tsix\n"
	if got := read(host, "192.168.250.2"); got != want {
		t.Errorf("host network hosts file:\n%s\nwant:\n%s", got, want)
	}

	own := pod.DeepCopy()
	own.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "h", MountPath: "/etc/hosts/"}}
	if m, err := v.hostsMount(own, &own.Spec.Containers[0], "10.244.1.7", "cluster.local"); m != nil || err != nil {
		t.Errorf("a container with its own /etc/hosts got %+v, %v", m, err)
	}
	if m, err := v.hostsMount(pod, &pod.Spec.Containers[0], "", "cluster.local"); m != nil || err != nil {
		t.Errorf("a pod without an IP got %+v, %v", m, err)
	}
}

// TestSandboxHostname: a pod's sandbox is named after spec.hostname or the pod (cut to 63 characters); a pod on
// the host network asks for no hostname, since its runtime cannot set one in the node's UTS namespace (runc
// refuses the sandbox otherwise).
func TestSandboxHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-bcd"
	for _, tt := range []struct {
		pod  corev1.Pod
		want string
	}{
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, "web"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{Hostname: "db-0"}}, "db-0"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long}}, strings.Repeat("a", 62)},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "host"}, Spec: corev1.PodSpec{HostNetwork: true}}, ""},
	} {
		if got := sandboxConfig(&tt.pod, 0, t.TempDir()).Hostname; got != tt.want {
			t.Errorf("pod %s (hostNetwork %v): hostname %q, want %q", tt.pod.Name, tt.pod.Spec.HostNetwork, got, tt.want)
		}
	}
}
