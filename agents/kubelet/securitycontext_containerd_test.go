package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/agents/network"
	"github.com/wheelhouse-dev/wheelhouse/agents/network/netnstest"
	criclient "github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
)

// TestSecurityContextOnContainerd: the sandbox and container configs the kubelet builds from a pod's security
// context and sysctls are accepted by a real containerd and take effect there — the conformance suite's RunAsUser
// and RunAsGroup, sysctls and privilege-escalation tests in one pod: the user, group and supplemental groups
// (fsGroup among them), the sysctls in the pod's IPC and network namespaces, a read-only root filesystem,
// no_new_privs, and a privileged container next to an unprivileged one (the sandbox made privileged for it).
func TestSecurityContextOnContainerd(t *testing.T) {
	rt := containerdNode(t)
	ctx := t.Context()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: "default", UID: "uid-secure"},
		Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
			RunAsUser: ptr.To[int64](1001), RunAsGroup: ptr.To[int64](2002), FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000},
			Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "net/ipv4/ip_unprivileged_port_start", Value: "80"}},
		}, Containers: []corev1.Container{
			{Name: "app", Image: containerdtest.ServerImage, Command: []string{"/podserver", "read", "/proc/self/status",
				"/proc/sys/kernel/shm_rmid_forced", "/proc/sys/net/ipv4/ip_unprivileged_port_start"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true)}},
			{Name: "rootfs", Image: containerdtest.ServerImage, Command: []string{"/podserver", "write", "/checkfile"},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}},
			{Name: "priv", Image: containerdtest.ServerImage, Command: []string{"/podserver", "read", "/proc/self/status"},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0)}},
		}}}
	logDir := t.TempDir()
	sbCfg := sandboxConfig(pod, 0, logDir)
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		_ = rt.StopPodSandbox(context.Background(), sb)
		_ = rt.RemovePodSandbox(context.Background(), sb)
	})
	out := map[string]string{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		id, err := rt.CreateContainer(ctx, sb, containerConfig(pod, c, 0, nil, nil), sbCfg)
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", c.Name, err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatalf("StartContainer %s: %v", c.Name, err)
		}
		out[c.Name] = containerOutput(t, rt, id)
	}

	app := statusOf(out["app"])
	for k, want := range map[string]string{"Uid": "1001", "Gid": "2002", "Groups": "2002 3000 4000", "NoNewPrivs": "1",
		"CapEff": "0000000000000000"} {
		if got := app[k]; got != want && !(k == "Groups" && sameFields(got, want)) {
			t.Errorf("app: %s %q, want %q", k, got, want)
		}
	}
	if !strings.HasSuffix(out["app"], "\n1\n80\n") {
		t.Errorf("app read the sysctls as %q, want 1 and 80", out["app"])
	}
	if !strings.Contains(out["rootfs"], "read-only file system") {
		t.Errorf("rootfs: writing / printed %q, want a read-only file system", out["rootfs"])
	}
	if own := statusOf(string(must(os.ReadFile("/proc/self/status"))(t))); statusOf(out["priv"])["CapEff"] != own["CapEff"] {
		t.Errorf("priv: CapEff %s, want every capability (%s)", statusOf(out["priv"])["CapEff"], own["CapEff"])
	}
}

// sameFields reports whether a and b hold the same space-separated words in any order.
func sameFields(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) != len(fb) {
		return false
	}
	seen := map[string]int{}
	for _, f := range fa {
		seen[f]++
	}
	for _, f := range fb {
		if seen[f]--; seen[f] < 0 {
			return false
		}
	}
	return true
}

// statusOf are the fields of /proc/<pid>/status lines in s, the first value of each (Uid's real one).
func statusOf(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if k == "Uid" || k == "Gid" {
			v = strings.Fields(v)[0]
		}
		m[k] = v
	}
	return m
}

// containerOutput waits for container id to exit 0 and returns its log's messages, one a line.
func containerOutput(t *testing.T, rt *criclient.Runtime, id string) string {
	t.Helper()
	var st *runtimeapi.ContainerStatus
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := rt.ContainerStatus(t.Context(), id, false)
		if err != nil {
			t.Fatal(err)
		}
		if st = resp.Status; st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not exit", st.Metadata.Name)
		}
		time.Sleep(50 * time.Millisecond) // polling the runtime
	}
	b, err := os.ReadFile(st.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if f := strings.SplitN(l, " ", 4); len(f) == 4 {
			lines = append(lines, f[3])
		}
	}
	if st.ExitCode != 0 {
		t.Fatalf("container %s exited %d: %s", st.Metadata.Name, st.ExitCode, lines)
	}
	return strings.Join(lines, "\n") + "\n"
}

// containerdNode is a real containerd in a network namespace of its own with the agent's pod network, the
// pause and podserver images imported, and the CRI client the agent would use.
func containerdNode(t *testing.T) *criclient.Runtime {
	t.Helper()
	dir := t.TempDir()
	ns := netnstest.New(t, dir, "node")
	n, err := network.New(network.Config{PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16"),
		StateDir: filepath.Join(dir, "network"), NetNS: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	cniDir := filepath.Join(dir, "cni")
	if err := n.WriteCNIConfig(cniDir, filepath.Join(dir, "ipam")); err != nil {
		t.Fatal(err)
	}
	c := containerdtest.Start(t, containerdtest.Options{NetNS: ns, CNIConfDir: cniDir})
	c.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	root := fmt.Sprintf("/wheelhouse-test-%d", time.Now().UnixNano())
	r, err := criclient.Open(ctx, criclient.Config{Endpoint: c.Socket, CgroupRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for ok, why := r.Ready(t.Context()); !ok; ok, why = r.Ready(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatal(errors.New(why))
		}
		time.Sleep(50 * time.Millisecond) // polling containerd's network readiness
	}
	return r
}
