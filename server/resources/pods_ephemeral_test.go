package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestEphemeralContainersSubresource runs pods/ephemeralcontainers as the machinery does — Prepare, Default,
// then Validate and the subresource's Validate — over edits of a running pod with one ephemeral container.
func TestEphemeralContainersSubresource(t *testing.T) {
	r := coreResource(t, "pods")
	us := r.UpdateSubresources["ephemeralcontainers"]
	if us == nil {
		t.Fatal("pods serve no ephemeralcontainers subresource")
	}
	old := testPod(func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox"}}}
		p.Status.Phase = corev1.PodRunning
	})
	r.Default(old)
	add := func(ec corev1.EphemeralContainer) func(p *corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec) }
	}
	ec := func(name string, edit func(c *corev1.EphemeralContainer)) corev1.EphemeralContainer {
		c := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox"}}
		if edit != nil {
			edit(&c)
		}
		return c
	}
	always := corev1.ContainerRestartPolicyAlways
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	tests := []struct {
		name string
		edit func(p *corev1.Pod)
		want []string
	}{
		{"added", add(ec("debug2", nil)), []string{}},
		{"added with a target and the allowed fields", add(ec("debug2", func(c *corev1.EphemeralContainer) {
			c.TargetContainerName = "web"
			c.Command, c.Stdin, c.TTY = []string{"sh"}, true, true
			c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			c.SecurityContext = &corev1.SecurityContext{Privileged: new(bool)}
		})), []string{}},
		{"targets an init container", add(ec("debug2", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "init" })),
			[]string{}},
		{"targets nothing", add(ec("debug2", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "nope" })),
			[]string{notFound + "spec.ephemeralContainers[1].targetContainerName"}},
		{"targets another ephemeral container", add(ec("debug2", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "debug" })),
			[]string{notFound + "spec.ephemeralContainers[1].targetContainerName"}},
		{"name of a container", add(ec("web", nil)), []string{duplicate + "spec.ephemeralContainers[1].name"}},
		{"name of an init container", add(ec("init", nil)), []string{duplicate + "spec.ephemeralContainers[1].name"}},
		{"name of an ephemeral container", add(ec("debug", nil)), []string{duplicate + "spec.ephemeralContainers[1].name"}},
		{"invalid name", add(ec("Debug_2", nil)), []string{invalid + "spec.ephemeralContainers[1].name"}},
		{"forbidden fields", add(ec("debug2", func(c *corev1.EphemeralContainer) {
			c.Ports = []corev1.ContainerPort{{ContainerPort: 80}}
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = probe, probe, probe
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
			c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}}
			c.RestartPolicy = &always
			c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "x"}}
		})), []string{
			forbidden + "spec.ephemeralContainers[1].ports", forbidden + "spec.ephemeralContainers[1].resources",
			forbidden + "spec.ephemeralContainers[1].resizePolicy", forbidden + "spec.ephemeralContainers[1].restartPolicy",
			forbidden + "spec.ephemeralContainers[1].livenessProbe", forbidden + "spec.ephemeralContainers[1].readinessProbe",
			forbidden + "spec.ephemeralContainers[1].startupProbe", forbidden + "spec.ephemeralContainers[1].lifecycle",
			forbidden + "spec.ephemeralContainers[1].volumeMounts[0].subPath"}},
		{"empty resources", add(ec("debug2", func(c *corev1.EphemeralContainer) {
			c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
		})), []string{}},
		{"existing one changed", func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "alpine" },
			[]string{forbidden + "spec.ephemeralContainers"}},
		{"existing one removed", func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil },
			[]string{forbidden + "spec.ephemeralContainers"}},
		{"reordered", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append([]corev1.EphemeralContainer{ec("debug2", nil)}, p.Spec.EphemeralContainers...)
		}, []string{}},
		// Everything outside spec.ephemeralContainers is old's again, whatever the body says.
		{"other changes are dropped", func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "nginx:2"
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Labels = map[string]string{"app": "other"}
			p.Status.Phase = corev1.PodFailed
		}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := old.DeepCopy()
			tt.edit(obj)
			us.Prepare(obj, old)
			r.Default(obj)
			got := errorSummary(append(r.Validate(obj), us.Validate(obj, old)...))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(old.Spec.Containers, obj.Spec.Containers); diff != "" {
				t.Errorf("containers changed (-old +new):\n%s", diff)
			}
			if obj.Spec.RestartPolicy != old.Spec.RestartPolicy || obj.Labels["app"] != "web" || obj.Status.Phase != corev1.PodRunning {
				t.Errorf("the update kept more than the ephemeral containers: restartPolicy %s labels %v phase %s",
					obj.Spec.RestartPolicy, obj.Labels, obj.Status.Phase)
			}
		})
	}

	t.Run("mirror pod", func(t *testing.T) {
		mirror := old.DeepCopy()
		mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		obj := mirror.DeepCopy()
		add(ec("debug2", nil))(obj)
		us.Prepare(obj, mirror)
		// Upstream's path: the root (field.NewPath("")).
		want := []string{forbidden + field.NewPath("").String()}
		if diff := cmp.Diff(want, errorSummary(us.Validate(obj, mirror))); diff != "" {
			t.Errorf("errors (-want +got):\n%s", diff)
		}
	})
}

// TestPodCreateRefusesEphemeralContainers: a new pod may not have ephemeral containers (only
// pods/ephemeralcontainers adds them), as upstream's ValidatePodCreate.
func TestPodCreateRefusesEphemeralContainers(t *testing.T) {
	r := coreResource(t, "pods")
	pod := testPod(func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox"}}}
	})
	r.Default(pod)
	if diff := cmp.Diff([]string{forbidden + "spec.ephemeralContainers"}, errorSummary(r.ValidateCreate(pod))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if errs := r.ValidateCreate(testPod(nil)); len(errs) != 0 {
		t.Errorf("a pod without ephemeral containers: %v", errs)
	}
}

// TestEphemeralContainerFieldsAllowList: every field of EphemeralContainerCommon is either allowed or
// refused when set, so that a field new to the API is refused until someone allows it.
func TestEphemeralContainerFieldsAllowList(t *testing.T) {
	c := corev1.Container{Name: "debug", Image: "busybox", Command: []string{"sh"}, Args: []string{"-c"}, WorkingDir: "/",
		EnvFrom: []corev1.EnvFromSource{{}}, Env: []corev1.EnvVar{{Name: "A"}}, VolumeMounts: []corev1.VolumeMount{{Name: "v"}},
		VolumeDevices: []corev1.VolumeDevice{{Name: "d"}}, TerminationMessagePath: "/t", TerminationMessagePolicy: "File",
		ImagePullPolicy: "Always", SecurityContext: &corev1.SecurityContext{}, Stdin: true, StdinOnce: true, TTY: true}
	if errs := validateEphemeralContainerRules(&c, field.NewPath("c")); len(errs) != 0 {
		t.Errorf("allowed fields refused: %v", errs)
	}
	c.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart}}
	if diff := cmp.Diff([]string{forbidden + "c.restartPolicyRules"}, errorSummary(validateEphemeralContainerRules(&c, field.NewPath("c")))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
