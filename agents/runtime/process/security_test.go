package process_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
)

// run runs a container of sandbox sb to completion and returns its stdout, failing the test if it exits non-zero.
func run(t *testing.T, rt *process.Runtime, sb string, sbCfg *runtimeapi.PodSandboxConfig, cc *runtimeapi.ContainerConfig) string {
	t.Helper()
	st := waitExited(t, rt, startContainer(t, rt, sb, sbCfg, cc))
	entries := readLog(t, st.LogPath)
	if st.ExitCode != 0 {
		t.Fatalf("%s exited %d: %s", cc.Metadata.Name, st.ExitCode, logText(entries, "stderr"))
	}
	return logText(entries, "stdout")
}

func secured(cc *runtimeapi.ContainerConfig, sc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.ContainerConfig {
	cc.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: sc}
	return cc
}

// statusFields are the named fields of /proc/self/status lines as the container printed them.
func statusFields(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// capsWithout is the hexadecimal capability mask mask without capability c.
func capsWithout(mask string, c uint) string {
	v, err := strconv.ParseUint(mask, 16, 64)
	if err != nil {
		return "bad mask " + mask
	}
	return fmt.Sprintf("%016x", v&^(1<<c))
}

// TestUsersAndGroups: the user, group and supplemental groups a container asks for are its process's; without
// a runAsGroup a user the node does not know has group 0 (as containerd gives a user the image does not know);
// supplemental groups alone apply to the runtime's own user, root.
func TestUsersAndGroups(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("users")
	sb := runSandbox(t, rt, sbCfg)
	ids := []string{"sh", "-c", "id -u; id -g; id -G"}
	cases := []struct {
		name string
		sc   *runtimeapi.LinuxContainerSecurityContext
		want string
	}{
		{"user-and-group", &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1001},
			RunAsGroup: &runtimeapi.Int64Value{Value: 2002}, SupplementalGroups: []int64{3000, 4000}}, "1001\n2002\n2002 3000 4000\n"},
		{"user-only", &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1001}}, "1001\n0\n0\n"},
		{"groups-only", &runtimeapi.LinuxContainerSecurityContext{SupplementalGroups: []int64{1234, 5678}}, "0\n0\n0 1234 5678\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(t, rt, sb, sbCfg, secured(containerConfig(tc.name, ids...), tc.sc)); got != tc.want {
				t.Errorf("id printed %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCapabilitiesAndConfinement: capabilities are containerd's — the default set for root, none effective for
// another user (the default set bounds it), additions and drops applied, all for a privileged container —
// no_new_privs and the default seccomp profile apply, and exec'd commands are confined as the container is.
func TestCapabilitiesAndConfinement(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("caps")
	sb := runSandbox(t, rt, sbCfg)
	own := statusFields(string(must(os.ReadFile("/proc/self/status"))(t)))
	const docker = "00000000a80425fb" // containerd's and Docker's default set
	procStatus := []string{"grep", "-E", "^(Cap|NoNewPrivs|Seccomp:)", "/proc/self/status"}
	cases := []struct {
		name string
		sc   *runtimeapi.LinuxContainerSecurityContext
		want map[string]string
	}{
		{"default", nil, map[string]string{"CapEff": docker, "CapPrm": docker, "CapBnd": docker, "CapInh": "0000000000000000",
			"CapAmb": "0000000000000000", "NoNewPrivs": "0", "Seccomp": "0"}},
		{"non-root", &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1000}, NoNewPrivs: true},
			map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": docker, "NoNewPrivs": "1"}},
		// "ALL" first, then the other changes: the additions survive a drop of ALL (names in any case, with or
		// without CAP_), a named drop removes from them.
		{"add-and-drop", &runtimeapi.LinuxContainerSecurityContext{Capabilities: &runtimeapi.Capability{
			AddCapabilities: []string{"NET_ADMIN", "cap_sys_time"}, DropCapabilities: []string{"ALL"}}},
			map[string]string{"CapEff": "0000000002001000", "CapBnd": "0000000002001000"}},
		{"drop-from-all", &runtimeapi.LinuxContainerSecurityContext{Capabilities: &runtimeapi.Capability{
			AddCapabilities: []string{"ALL"}, DropCapabilities: []string{"NET_ADMIN"}}},
			map[string]string{"CapEff": capsWithout(own["CapEff"], 12)}},
		{"privileged", &runtimeapi.LinuxContainerSecurityContext{Privileged: true,
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
			map[string]string{"CapEff": own["CapEff"], "CapBnd": own["CapBnd"], "Seccomp": "0"}},
		{"runtime-default-seccomp", &runtimeapi.LinuxContainerSecurityContext{
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
			map[string]string{"CapEff": docker, "Seccomp": "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := statusFields(run(t, rt, sb, sbCfg, secured(containerConfig(tc.name, procStatus...), tc.sc)))
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s: %s, want %s", k, got[k], want)
				}
			}
		})
	}

	// The default profile refuses add_key, which the kernel lets root do; Unconfined does not.
	for profile, want := range map[runtimeapi.SecurityProfile_ProfileType]string{
		runtimeapi.SecurityProfile_RuntimeDefault: "operation not permitted\n",
		runtimeapi.SecurityProfile_Unconfined:     "added\n",
	} {
		cc := secured(testProgramConfig(t, "addkey-"+strings.ToLower(profile.String()), "addkey"),
			&runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: profile}})
		if got := run(t, rt, sb, sbCfg, cc); got != want {
			t.Errorf("add_key under %s: %q, want %q", profile, got, want)
		}
	}
	// Without CAP_NET_ADMIN even root cannot add a link to its own network namespace (the conformance suite's
	// unprivileged container); a privileged one can.
	for name, privileged := range map[string]bool{"unprivileged-ip": false, "privileged-ip": true} {
		cc := secured(containerConfig(name, "sh", "-c", "ip link add dummy0 type dummy 2>&1 || true"),
			&runtimeapi.LinuxContainerSecurityContext{Privileged: privileged})
		got := run(t, rt, sb, sbCfg, cc)
		if denied := strings.Contains(got, "Operation not permitted"); denied == privileged {
			t.Errorf("%s: ip link add printed %q", name, got)
		}
	}

	// An exec'd command is confined as the container is.
	id := startContainer(t, rt, sb, sbCfg, secured(containerConfig("long", "sleep", "300"), &runtimeapi.LinuxContainerSecurityContext{
		RunAsUser: &runtimeapi.Int64Value{Value: 1000}, NoNewPrivs: true,
		Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}}))
	stdout, stderr, err := rt.ExecSync(t.Context(), id, procStatus, 10*time.Second)
	if err != nil {
		t.Fatalf("exec: %v: %s", err, stderr)
	}
	got := statusFields(string(stdout))
	for k, want := range map[string]string{"CapEff": "0000000000000000", "CapBnd": docker, "NoNewPrivs": "1", "Seccomp": "2"} {
		if got[k] != want {
			t.Errorf("exec: %s %s, want %s", k, got[k], want)
		}
	}
}

// TestMaskedReadonlyPathsAndRootfs: masked paths are empty in the container, read-only paths and /sys cannot be
// written (a privileged container's paths are left alone), and a read-only root filesystem leaves only the
// container's own writable mounts writable — all without changing the node's view.
func TestMaskedReadonlyPathsAndRootfs(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("paths")
	sb := runSandbox(t, rt, sbCfg)
	base := t.TempDir()
	maskedDir, maskedFile, roDir := filepath.Join(base, "masked"), filepath.Join(base, "masked-file"), filepath.Join(base, "ro")
	for _, d := range []string{maskedDir, roDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(maskedDir, "secret"), maskedFile} {
		if err := os.WriteFile(f, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `ls ` + maskedDir + `; cat ` + maskedFile + `; echo;` +
		` touch ` + roDir + `/x 2>/dev/null && echo ro-writable || echo ro-readonly;` +
		` awk '$5=="/sys"{s=$6} END{split(s,o,","); print "sys-" o[1]}' /proc/self/mountinfo` // the topmost /sys
	sc := &runtimeapi.LinuxContainerSecurityContext{MaskedPaths: []string{maskedDir, maskedFile, filepath.Join(base, "absent")},
		ReadonlyPaths: []string{roDir}}
	if got := run(t, rt, sb, sbCfg, secured(containerConfig("confined", "sh", "-c", script), sc)); got != "\nro-readonly\nsys-ro\n" {
		t.Errorf("confined container saw %q", got)
	}
	priv := &runtimeapi.LinuxContainerSecurityContext{Privileged: true, MaskedPaths: sc.MaskedPaths, ReadonlyPaths: sc.ReadonlyPaths}
	if got := run(t, rt, sb, sbCfg, secured(containerConfig("privileged", "sh", "-c", script), priv)); got != "secret\nsecret\nro-writable\nsys-rw\n" {
		t.Errorf("privileged container saw %q", got)
	}

	data := t.TempDir()
	dataDst := filepath.Join(t.TempDir(), "data")
	cc := secured(containerConfig("rootfs", "sh", "-c", `touch `+base+`/x 2>&1 || true; touch `+dataDst+`/y && echo data-writable`),
		&runtimeapi.LinuxContainerSecurityContext{ReadonlyRootfs: true})
	cc.Mounts = []*runtimeapi.Mount{{HostPath: data, ContainerPath: dataDst}}
	got := run(t, rt, sb, sbCfg, cc)
	if !regexp.MustCompile(`Read-only file system\n`).MatchString(got) || !strings.HasSuffix(got, "data-writable\n") {
		t.Errorf("read-only rootfs container printed %q, want a refused write and a written volume", got)
	}
	if _, err := os.Stat(filepath.Join(data, "y")); err != nil {
		t.Errorf("the volume write did not reach the node: %v", err)
	}
	// The node's view is as it was.
	for _, f := range []string{filepath.Join(roDir, "host"), filepath.Join(base, "host")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Errorf("the node cannot write %s any more: %v", f, err)
		}
	}
	if b, err := os.ReadFile(maskedFile); err != nil || string(b) != "secret" {
		t.Errorf("the node's masked file reads %q, %v", b, err)
	}
}

// TestUnsupportedSecurityIsRefused: what the process runtime cannot apply is refused with InvalidArgument
// rather than ignored.
func TestUnsupportedSecurityIsRefused(t *testing.T) {
	rt, _ := testRuntime(t)
	sbCfg := sandboxConfig("refused")
	sb := runSandbox(t, rt, sbCfg)
	for name, sc := range map[string]*runtimeapi.LinuxContainerSecurityContext{
		"localhost-seccomp": {Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/kubelet/seccomp/x.json"}},
		"apparmor":          {Apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		"unknown-cap":       {Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"FLY"}}},
		"username":          {RunAsUsername: "nobody"},
	} {
		_, err := rt.CreateContainer(t.Context(), sb, secured(containerConfig(name, "true"), sc), sbCfg)
		if grpcstatus.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

// TestSandboxSysctls: a sandbox's sysctls are written in its own IPC and network namespaces — its containers
// and commands exec'd in them see them, the node and other sandboxes keep their values — and a sysctl the
// runtime cannot confine to the pod is refused (InvalidArgument) before anything is created.
func TestSandboxSysctls(t *testing.T) {
	rt, _ := testRuntime(t)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/")))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	const shm, port = "kernel.shm_rmid_forced", "net.ipv4.ip_unprivileged_port_start"
	hostShm, hostPort := read(shm), read(port)
	if hostShm == "1" || hostPort == "80" {
		t.Fatalf("the node already has %s=%s %s=%s: the test could not tell", shm, hostShm, port, hostPort)
	}
	sbCfg := sandboxConfig("sysctls")
	sbCfg.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{shm: "1", "net/ipv4/ip_unprivileged_port_start": "80"}}
	sb := runSandbox(t, rt, sbCfg)
	script := []string{"sh", "-c", "cat /proc/sys/kernel/shm_rmid_forced /proc/sys/net/ipv4/ip_unprivileged_port_start; readlink /proc/self/ns/ipc"}
	out := strings.Split(run(t, rt, sb, sbCfg, containerConfig("reader", script...)), "\n")
	hostIPC := must(os.Readlink("/proc/self/ns/ipc"))(t)
	if len(out) < 3 || out[0] != "1" || out[1] != "80" || out[2] == hostIPC {
		t.Errorf("the container saw %q, want 1, 80 and an IPC namespace other than the node's %s", out, hostIPC)
	}
	id := startContainer(t, rt, sb, sbCfg, containerConfig("long", "sleep", "300"))
	if stdout, stderr, err := rt.ExecSync(t.Context(), id, script, 10*time.Second); err != nil || !strings.HasPrefix(string(stdout), "1\n80\n") {
		t.Errorf("exec saw %q (%v, %s)", stdout, err, stderr)
	}
	if got := must(rt.PodSandboxStatus(t.Context(), sb, false))(t).Status.Linux.Namespaces.Options.Ipc; got != runtimeapi.NamespaceMode_POD {
		t.Errorf("sandbox IPC namespace reported %s, want POD", got)
	}
	if read(shm) != hostShm || read(port) != hostPort {
		t.Errorf("the node's sysctls changed: %s=%s %s=%s", shm, read(shm), port, read(port))
	}
	otherCfg := sandboxConfig("plain")
	other := runSandbox(t, rt, otherCfg)
	if got := run(t, rt, other, otherCfg, containerConfig("reader", script...)); strings.HasPrefix(got, "1\n80\n") {
		t.Errorf("another sandbox sees the first one's sysctls: %q", got)
	}

	hostNS := func(net, ipc bool) *runtimeapi.LinuxSandboxSecurityContext {
		o := &runtimeapi.NamespaceOption{}
		if net {
			o.Network = runtimeapi.NamespaceMode_NODE
		}
		if ipc {
			o.Ipc = runtimeapi.NamespaceMode_NODE
		}
		return &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: o}
	}
	for name, linux := range map[string]*runtimeapi.LinuxPodSandboxConfig{
		"node-wide":        {Sysctls: map[string]string{"vm.swappiness": "10"}},
		"uts":              {Sysctls: map[string]string{"kernel.domainname": "example"}},
		"outside-proc-sys": {Sysctls: map[string]string{"net.ipv4..": "1"}},
		"host-network":     {Sysctls: map[string]string{port: "80"}, SecurityContext: hostNS(true, false)},
		"host-ipc":         {Sysctls: map[string]string{shm: "1"}, SecurityContext: hostNS(false, true)},
	} {
		cfg := sandboxConfig(name)
		cfg.Linux = linux
		_, err := rt.RunPodSandbox(t.Context(), cfg, "")
		if grpcstatus.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if read(shm) != hostShm || read(port) != hostPort {
		t.Errorf("a refused sandbox changed the node's sysctls")
	}
	if n := len(must(rt.ListPodSandbox(t.Context(), nil))(t)); n != 2 {
		t.Errorf("%d sandboxes, want the 2 accepted ones", n)
	}
}
