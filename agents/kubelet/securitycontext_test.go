package kubelet

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// TestSecurityContextReachesTheRuntime: the pod's and its containers' security contexts and the pod's sysctls
// are in the CRI configs the runtime is given, as kubelet builds them (the container's fields over the pod's,
// fsGroup among the supplemental groups, sysctl names with dots, the sandbox privileged for a privileged
// container).
func TestSecurityContextReachesTheRuntime(t *testing.T) {
	e := newPodEnv(t)
	pod := simple("secure", corev1.RestartPolicyAlways,
		corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"}, SecurityContext: &corev1.SecurityContext{
			RunAsGroup: ptr.To[int64](2002), ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:   &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
		}},
		corev1.Container{Name: "priv", Image: "busybox", Command: []string{"sleep", "1d"}, SecurityContext: &corev1.SecurityContext{
			Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0), ProcMount: ptr.To(corev1.UnmaskedProcMount),
			AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("k8s-apparmor-example")},
		}})
	pod.Spec.ShareProcessNamespace = ptr.To(true)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1001), RunAsGroup: ptr.To[int64](2001), FSGroup: ptr.To[int64](3000),
		SupplementalGroups: []int64{4000, 4001}, SupplementalGroupsPolicy: ptr.To(corev1.SupplementalGroupsPolicyStrict),
		SeccompProfile:  &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
		Sysctls:         []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "net/ipv4/ip_unprivileged_port_start", Value: "80"}},
	}
	e.create(pod)
	e.until("both running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }, "secure")

	podNS := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD,
		Pid: runtimeapi.NamespaceMode_POD}
	groups := []int64{3000, 4000, 4001}
	strict := runtimeapi.SupplementalGroupsPolicy_Strict
	want := map[string]*runtimeapi.LinuxContainerSecurityContext{
		"app": {
			RunAsUser: &runtimeapi.Int64Value{Value: 1001}, RunAsGroup: &runtimeapi.Int64Value{Value: 2002},
			SupplementalGroups: groups, SupplementalGroupsPolicy: strict, NamespaceOptions: podNS,
			ReadonlyRootfs: true, NoNewPrivs: true,
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_BIND_SERVICE"}, DropCapabilities: []string{"ALL"}},
			Seccomp:      &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			Apparmor:     &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			MaskedPaths:  defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths,
		},
		"priv": {
			RunAsUser: &runtimeapi.Int64Value{Value: 0}, RunAsGroup: &runtimeapi.Int64Value{Value: 2001},
			SupplementalGroups: groups, SupplementalGroupsPolicy: strict, NamespaceOptions: podNS, Privileged: true,
			Seccomp:  &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			Apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-apparmor-example"},
		},
	}
	for name, w := range want {
		if diff := cmp.Diff(w, e.rt.config(name).GetLinux().GetSecurityContext(), protocmp.Transform()); diff != "" {
			t.Errorf("container %s's security context (-want +got):\n%s", name, diff)
		}
	}
	sb := e.rt.sandboxConfig("app").GetLinux()
	wantSandbox := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: podNS, RunAsUser: &runtimeapi.Int64Value{Value: 1001}, RunAsGroup: &runtimeapi.Int64Value{Value: 2001},
		SupplementalGroups: groups, SupplementalGroupsPolicy: strict, Privileged: true,
		Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
	}
	if diff := cmp.Diff(wantSandbox, sb.GetSecurityContext(), protocmp.Transform()); diff != "" {
		t.Errorf("sandbox security context (-want +got):\n%s", diff)
	}
	wantSysctls := map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_unprivileged_port_start": "80"}
	if diff := cmp.Diff(wantSysctls, sb.GetSysctls()); diff != "" {
		t.Errorf("sandbox sysctls (-want +got):\n%s", diff)
	}
}

// TestSecurityContextDefaults: a pod that sets nothing gets kubelet's defaults — its own namespaces, one PID
// namespace per container, seccomp Unconfined, no AppArmor profile, the default masked and read-only paths —
// and a host-namespace pod the node's namespaces; a seccomp localhost profile is read under kubelet's root.
func TestSecurityContextDefaults(t *testing.T) {
	plain := simple("plain", corev1.RestartPolicyAlways)
	got := containerSecurityContext(plain, &plain.Spec.Containers[0])
	want := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD,
			Pid: runtimeapi.NamespaceMode_CONTAINER},
		Seccomp:     &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
		MaskedPaths: defaultMaskedPaths(), ReadonlyPaths: defaultReadonlyPaths,
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if sc, sysctls := sandboxSecurityContext(plain); sc.Privileged || sc.RunAsUser != nil || sysctls != nil {
		t.Errorf("plain sandbox %v, sysctls %v", sc, sysctls)
	}

	host := simple("host", corev1.RestartPolicyAlways)
	host.Spec.HostNetwork, host.Spec.HostIPC, host.Spec.HostPID = true, true, true
	wantNS := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE,
		Pid: runtimeapi.NamespaceMode_NODE}
	if diff := cmp.Diff(wantNS, sandboxConfig(host, 0, "/logs").GetLinux().GetSecurityContext().GetNamespaceOptions(), protocmp.Transform()); diff != "" {
		t.Errorf("host namespaces (-want +got):\n%s", diff)
	}

	local := simple("local", corev1.RestartPolicyAlways)
	local.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
		Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}}
	wantSeccomp := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost,
		LocalhostRef: "/var/lib/kubelet/seccomp/profiles/audit.json"}
	if diff := cmp.Diff(wantSeccomp, containerSecurityContext(local, &local.Spec.Containers[0]).Seccomp, protocmp.Transform()); diff != "" {
		t.Errorf("localhost seccomp (-want +got):\n%s", diff)
	}
}

// TestRunAsNonRootOnProcessRuntime: with runAsNonRoot, a container whose runAsUser is 0, or that has none on a
// runtime without images (its command runs as the runtime's user, root), is refused with kubelet's
// CreateContainerConfigError and message; a non-root runAsUser runs.
func TestRunAsNonRootOnProcessRuntime(t *testing.T) {
	e := newPodEnv(t)
	nonRoot := func(name string, uid *int64) *corev1.Pod {
		p := simple(name, corev1.RestartPolicyAlways)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: uid}
		return p
	}
	e.create(nonRoot("implicit-root", nil))
	e.create(nonRoot("explicit-root", ptr.To[int64](0)))
	e.create(nonRoot("explicit-user", ptr.To[int64](1000)))
	for name, msg := range map[string]string{
		"implicit-root": "container has runAsNonRoot and image will run as root (pod: %q, container: app)",
		"explicit-root": "container's runAsUser breaks non-root policy (pod: %q, container: app)",
	} {
		e.until(name+" refused", func(p *corev1.Pod) bool {
			reason, got := waiting(p, "app")
			return reason == "CreateContainerConfigError" && got == fmt.Sprintf(msg, name+"_default("+string(p.UID)+")")
		}, name)
	}
	e.until("explicit-user running", isRunning, "explicit-user")
	if c := e.rt.config("app"); c == nil || c.GetLinux().GetSecurityContext().GetRunAsUser().GetValue() != 1000 {
		t.Errorf("the only container created is not the non-root one: %v", c)
	}
}

// TestRunAsNonRootChecksTheImageUser: on a runtime with images, a container with runAsNonRoot and no runAsUser
// runs as its image's user: a numeric non-root user runs; root, or a user name that cannot be checked, is
// refused (CreateContainerConfigError, a Failed event).
func TestRunAsNonRootChecksTheImageUser(t *testing.T) {
	ce := newCRIEnv(t, nil)
	ce.srv.SetImageUser("example.test/root:1", ptr.To[int64](0), "")
	ce.srv.SetImageUser("example.test/nonroot:1", ptr.To[int64](1234), "")
	ce.srv.SetImageUser("example.test/named:1", nil, "nobody")
	for _, name := range []string{"root", "nonroot", "named"} {
		p := imagePod(name, "example.test/"+name+":1", corev1.PullIfNotPresent)
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
		ce.create(p)
	}
	ce.until("nonroot running", isRunning, "nonroot")
	for name, msg := range map[string]string{
		"root":  "container has runAsNonRoot and image will run as root (pod: %q, container: app)",
		"named": "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: %q, container: app)",
	} {
		p := ce.until(name+" refused", func(p *corev1.Pod) bool {
			reason, _ := waiting(p, "app")
			return reason == "CreateContainerConfigError"
		}, name)
		want := fmt.Sprintf(msg, name+"_default("+string(p.UID)+")")
		if _, got := waiting(p, "app"); got != want {
			t.Errorf("%s: waiting message %q, want %q", name, got, want)
		}
		ce.eventually(name, "Warning Failed Error: "+want, 1)
	}
}

// TestRunAsGroupTakesTheImageUser: a container with a runAsGroup and no runAsUser runs as its image's user in that
// group (kubelet names the image's user to the runtime, which refuses a group without a user, as containerd does).
func TestRunAsGroupTakesTheImageUser(t *testing.T) {
	ce := newCRIEnv(t, nil)
	ce.srv.SetImageUser("example.test/nonroot:1", ptr.To[int64](1234), "")
	p := imagePod("grouped", "example.test/nonroot:1", corev1.PullIfNotPresent)
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsGroup: ptr.To[int64](2002)}
	ce.create(p)
	ce.until("grouped running", isRunning, "grouped")
}
