package resources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func resizeTestPod() *corev1.Pod {
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "init", Image: "busybox", Resources: res("10m", "10Mi"),
				ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}},
			{Name: "sidecar", Image: "busybox", RestartPolicy: &always, Resources: res("10m", "10Mi")},
		},
		Containers: []corev1.Container{{Name: "app", Image: "busybox", Resources: res("20m", "20Mi")}},
	}}
	defaultPod(pod)
	return pod
}

// TestValidatePodResize covers the cases of upstream's ValidatePodResize the API test does not: init and
// sidecar containers, static and Windows pods, pod-level resources, and that a resize keeps nothing else.
func TestValidatePodResize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		want   string // "" when valid
	}{
		{name: "sidecar resized", change: func(p *corev1.Pod) {
			p.Spec.InitContainers[1].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("15m")
		}},
		{name: "init container with RestartContainer resized", change: func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("15m")
		}, want: "spec.initContainers[0]: Forbidden: non-sidecar init containers with a resize policy of RestartContainer cannot be resized"},
		{name: "init container's other resource", change: func(p *corev1.Pod) {
			p.Spec.InitContainers[1].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, want: "only cpu and memory resources for init or sidecar containers are mutable"},
		{name: "init container removed", change: func(p *corev1.Pod) { p.Spec.InitContainers = p.Spec.InitContainers[1:] },
			want: "spec.initContainers: Forbidden: initContainers may not be added or removed on resize"},
		{name: "static pod", change: func(p *corev1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "x"} },
			want: "static pods cannot be resized"},
		{name: "windows pod", change: func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} },
			want: "windows pods cannot be resized"},
		{name: "pod-level resources", change: func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}, want: "resize of pods with pod-level resources is forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := resizeTestPod()
			if tc.name == "static pod" || tc.name == "windows pod" || tc.name == "pod-level resources" {
				tc.change(old) // a property of the stored pod
			}
			pod := old.DeepCopy()
			tc.change(pod)
			pod.Spec.Containers[0].Image = "nginx" // not a resize: dropped by Prepare
			podResize.Prepare(pod, old)
			// With containers added or removed the body is kept as sent, for validation to refuse.
			if same := len(pod.Spec.InitContainers) == len(old.Spec.InitContainers); same == (pod.Spec.Containers[0].Image != "busybox") {
				t.Errorf("prepare: image %q with the init containers unchanged: %v", pod.Spec.Containers[0].Image, same)
			}
			errs := podResize.Validate(pod, old)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
				t.Errorf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}
