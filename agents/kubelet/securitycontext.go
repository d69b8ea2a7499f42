package kubelet

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Security contexts as kubelet hands them to the runtime (pkg/kubelet/kuberuntime: security_context.go,
// kuberuntime_sandbox_linux.go, helpers.go):
//
//   - a container's settings win over its pod's for the fields both have (runAsUser, runAsGroup, runAsNonRoot,
//     seLinuxOptions, seccompProfile, appArmorProfile); capabilities, privileged, readOnlyRootFilesystem,
//     allowPrivilegeEscalation and procMount exist on containers only;
//   - supplemental groups are the pod's fsGroup first, then its supplementalGroups, for the sandbox and every
//     container; the sandbox runs as the pod's runAsUser and runAsGroup, privileged when any container is;
//   - the pod's sysctls go to the sandbox (LinuxPodSandboxConfig.Sysctls) with "/" separators turned into "."
//     as kubelet does before creating the sandbox: the runtime writes them in the pod's namespaces;
//   - allowPrivilegeEscalation false is no_new_privs; procMount Default masks and makes read-only the /proc
//     and /sys paths kubelet lists, Unmasked neither;
//   - seccomp: the profile asked for, Unconfined when none is (kubelet's default, seccompDefault false), a
//     Localhost profile under kubelet's seccomp root; AppArmor: the profile asked for (the container's, the
//     deprecated per-container annotation, the pod's), none when unset;
//   - runAsNonRoot is checked before the container is created, against the image's user when no runAsUser
//     says otherwise: a container that would run as root is refused (CreateContainerConfigError).
//
// Kubelet's seccomp root (--root-dir's seccomp): where localhost profiles are read, as operators and the
// Security Profiles Operator place them.
const seccompProfileRoot = "/var/lib/kubelet/seccomp"

// effectiveSecurityContext is the container's security context over the pod's (kubelet's
// DetermineEffectiveSecurityContext, without the Windows options). The result shares pointers with pod and c: it
// is only read.
func effectiveSecurityContext(pod *corev1.Pod, c *corev1.Container) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.SELinuxOptions, sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot = psc.SELinuxOptions, psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot
	}
	csc := c.SecurityContext
	if csc == nil {
		return sc
	}
	sc.Capabilities, sc.Privileged, sc.ReadOnlyRootFilesystem = csc.Capabilities, csc.Privileged, csc.ReadOnlyRootFilesystem
	sc.AllowPrivilegeEscalation, sc.ProcMount = csc.AllowPrivilegeEscalation, csc.ProcMount
	if csc.SELinuxOptions != nil {
		sc.SELinuxOptions = csc.SELinuxOptions
	}
	if csc.RunAsUser != nil {
		sc.RunAsUser = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		sc.RunAsGroup = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		sc.RunAsNonRoot = csc.RunAsNonRoot
	}
	return sc
}

// containerSecurityContext is the CRI security context of a pod container.
func containerSecurityContext(pod *corev1.Pod, c *corev1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := effectiveSecurityContext(pod, c)
	out := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:     capabilities(sc.Capabilities),
		Privileged:       sc.Privileged != nil && *sc.Privileged,
		NamespaceOptions: namespaceOptions(pod),
		SelinuxOptions:   selinuxOptions(sc.SELinuxOptions),
		RunAsUser:        int64Value(sc.RunAsUser),
		RunAsGroup:       int64Value(sc.RunAsGroup),
		ReadonlyRootfs:   sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem,
		// Kubelet's AddNoNewPrivileges: only an explicit false sets it.
		NoNewPrivs: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		Seccomp:    seccompProfile(pod, c),
	}
	out.SupplementalGroups, out.SupplementalGroupsPolicy = supplementalGroups(pod.Spec.SecurityContext)
	if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
		out.MaskedPaths, out.ReadonlyPaths = defaultMaskedPaths(), defaultReadonlyPaths
	}
	out.Apparmor = appArmorProfile(pod, c)
	return out
}

// sandboxSecurityContext is the CRI security context of a pod's sandbox and its sysctls.
func sandboxSecurityContext(pod *corev1.Pod) (*runtimeapi.LinuxSandboxSecurityContext, map[string]string) {
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: namespaceOptions(pod),
		Privileged:       hasPrivilegedContainer(pod),
		// Kubelet runs every sandbox with the runtime's default profile, so that a pod-level profile may be
		// as strict as its containers allow (kubernetes issue 84623).
		Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return sc, nil
	}
	sc.RunAsUser, sc.RunAsGroup = int64Value(psc.RunAsUser), int64Value(psc.RunAsGroup)
	sc.SelinuxOptions = selinuxOptions(psc.SELinuxOptions)
	sc.SupplementalGroups, sc.SupplementalGroupsPolicy = supplementalGroups(psc)
	var sysctls map[string]string
	for _, s := range psc.Sysctls {
		if sysctls == nil {
			sysctls = map[string]string{}
		}
		sysctls[sysctl.NormalizeName(s.Name)] = s.Value
	}
	return sc, sysctls
}

// namespaceOptions are the pod's namespaces (kubelet's NamespacesForPod): its own network, IPC and, with
// shareProcessNamespace, PID namespaces unless it asks for the node's; each container its own PID namespace
// otherwise.
func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD,
		Pid: runtimeapi.NamespaceMode_CONTAINER}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		o.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	return o
}

// supplementalGroups are the pod's fsGroup then its supplementalGroups, and its policy (Merge when unset).
func supplementalGroups(psc *corev1.PodSecurityContext) ([]int64, runtimeapi.SupplementalGroupsPolicy) {
	if psc == nil {
		return nil, runtimeapi.SupplementalGroupsPolicy_Merge
	}
	var groups []int64
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)
	policy := runtimeapi.SupplementalGroupsPolicy_Merge
	if psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == corev1.SupplementalGroupsPolicyStrict {
		policy = runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return groups, policy
}

func hasPrivilegedContainer(pod *corev1.Pod) bool {
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

func capabilities(caps *corev1.Capabilities) *runtimeapi.Capability {
	if caps == nil {
		return nil
	}
	out := &runtimeapi.Capability{AddCapabilities: []string{}, DropCapabilities: []string{}}
	for _, c := range caps.Add {
		out.AddCapabilities = append(out.AddCapabilities, string(c))
	}
	for _, c := range caps.Drop {
		out.DropCapabilities = append(out.DropCapabilities, string(c))
	}
	return out
}

func selinuxOptions(o *corev1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

func int64Value(v *int64) *runtimeapi.Int64Value {
	if v == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *v}
}

// seccompProfile is the container's seccomp profile, else the pod's, else Unconfined.
func seccompProfile(pod *corev1.Pod, c *corev1.Container) *runtimeapi.SecurityProfile {
	var p *corev1.SeccompProfile
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		p = c.SecurityContext.SeccompProfile
	} else if pod.Spec.SecurityContext != nil {
		p = pod.Spec.SecurityContext.SeccompProfile
	}
	switch {
	case p == nil || p.Type == corev1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	case p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	}
	// Localhost (validation requires its localhostProfile, a relative path).
	ref := ""
	if p.LocalhostProfile != nil {
		ref = filepath.Join(seccompProfileRoot, *p.LocalhostProfile)
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
}

// appArmorProfile is the container's AppArmor profile, else the deprecated annotation's for it, else the pod's
// (nil: none asked for, the runtime decides). Only the profile is sent, not its deprecated string form: the
// runtimes the agent drives (containerd 1.6 on) read the profile.
func appArmorProfile(pod *corev1.Pod, c *corev1.Container) *runtimeapi.SecurityProfile {
	var p *corev1.AppArmorProfile
	switch v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; {
	case c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil:
		p = c.SecurityContext.AppArmorProfile
	case ok && v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault:
		p = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
	case ok && v == corev1.DeprecatedAppArmorBetaProfileNameUnconfined:
		p = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	case ok && strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix):
		name := strings.TrimPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
		p = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	case pod.Spec.SecurityContext != nil:
		p = pod.Spec.SecurityContext.AppArmorProfile
	}
	switch {
	case p == nil:
		return nil
	case p.Type == corev1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case p.Type == corev1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
	name := ""
	if p.LocalhostProfile != nil {
		name = *p.LocalhostProfile
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: name}
}

// defaultReadonlyPaths are the paths a container with procMount Default sees read-only (moby's list, which
// kubelet keeps in step with).
var defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// defaultMaskedPaths are the paths a container with procMount Default cannot read (moby's list, which kubelet
// keeps in step with), including each CPU's thermal_throttle directory this node has.
var defaultMaskedPaths = sync.OnceValue(func() []string {
	paths := []string{"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap"}
	throttles, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle")
	return append(paths, throttles...)
})

// verifyRunAsNonRoot refuses, as kubelet's verifyRunAsNonRoot does, a container with runAsNonRoot that would
// run as root: its runAsUser is 0, or without one the image's user is (uid) or cannot be told (a user name).
func verifyRunAsNonRoot(pod *corev1.Pod, c *corev1.Container, uid *int64, username string) error {
	sc := effectiveSecurityContext(pod, c)
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	where := fmt.Sprintf("(pod: %q, container: %s)", podDescription(pod), c.Name)
	switch {
	case sc.RunAsUser != nil && *sc.RunAsUser == 0:
		return fmt.Errorf("container's runAsUser breaks non-root policy %s", where)
	case sc.RunAsUser != nil:
		return nil
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root %s", username, where)
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root %s", where)
	case uid != nil && (*uid < 0 || *uid > math.MaxInt32):
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): must be between 0 and %d, inclusive %s",
			*uid, math.MaxInt32, math.MaxInt32, where)
	}
	return nil
}

// podDescription is how kubelet names a pod in messages (format.Pod): name_namespace(uid).
func podDescription(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// needsImageUser reports whether c's runAsNonRoot depends on its image's user.
func needsImageUser(pod *corev1.Pod, c *corev1.Container) bool {
	sc := effectiveSecurityContext(pod, c)
	return sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.RunAsUser == nil
}

// imageUser is the user c's image runs as (kubelet's getImageUser): its numeric user, else its user name, else
// root. A runtime without images runs the command as itself, root.
func (w *worker) imageUser(ctx context.Context, c *corev1.Container) (*int64, string, error) {
	root := int64(0)
	if w.p.images == nil {
		return &root, "", nil
	}
	image, err := withDefaultTag(c.Image)
	if err != nil {
		return nil, "", err
	}
	st, err := w.p.images.svc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		return nil, "", fmt.Errorf("inspect image %q: %w", c.Image, err)
	}
	switch img := st.GetImage(); {
	case img.GetUid() != nil:
		uid := img.GetUid().GetValue()
		return &uid, "", nil
	case img.GetUsername() != "":
		return nil, img.GetUsername(), nil
	}
	return &root, "", nil
}

// userFromImage completes a container's user as kubelet's determineEffectiveSecurityContext: without a
// runAsUser the container runs as its image's user, named to the runtime (its uid, else its user name), so a
// runAsGroup alone is a group for that user (the runtime refuses a group without a user). Only runtimes with
// images: the process runtime runs commands as itself.
func (w *worker) userFromImage(ctx context.Context, c *corev1.Container, sc *runtimeapi.LinuxContainerSecurityContext) error {
	if w.p.images == nil || sc.RunAsUser != nil || sc.RunAsUsername != "" {
		return nil
	}
	uid, name, err := w.imageUser(ctx, c)
	if err != nil {
		return err
	}
	if uid != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *uid}
	} else {
		sc.RunAsUsername = name
	}
	return nil
}

// admitRunAsUser refuses c before its image is pulled when its runAsUser alone breaks its runAsNonRoot: a
// container that cannot run costs no pull. It reports whether c may go on.
func (w *worker) admitRunAsUser(pod *corev1.Pod, c *corev1.Container, ob *observed) bool {
	return w.admitConfig(pod, c, ob, verifyRunAsNonRoot(pod, c, nil, ""))
}

// admitImageUser refuses c, once its image is present, when its runAsNonRoot leaves the user to the image and
// the image's user is root or cannot be told. It reports whether c may be created.
func (w *worker) admitImageUser(ctx context.Context, pod *corev1.Pod, c *corev1.Container, ob *observed) bool {
	if !needsImageUser(pod, c) {
		return true
	}
	uid, username, err := w.imageUser(ctx, c)
	if err == nil {
		err = verifyRunAsNonRoot(pod, c, uid, username)
	}
	return w.admitConfig(pod, c, ob, err)
}

// admitConfig records err, when not nil, as kubelet records a container configuration it cannot create: the
// waiting reason CreateContainerConfigError and a Failed event. It reports whether err is nil.
func (w *worker) admitConfig(pod *corev1.Pod, c *corev1.Container, ob *observed, err error) bool {
	if err == nil {
		return true
	}
	ob.waiting[c.Name] = [2]string{"CreateContainerConfigError", err.Error()}
	w.p.cfg.Recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
	return false
}
