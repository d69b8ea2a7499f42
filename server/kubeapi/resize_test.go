package kubeapi

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// resizablePod creates a Burstable pod bound to n1 whose container runs and reports its resources, as a node
// that resizes does (a running container without them is on a node that does not).
func resizablePod(t *testing.T, cs kubernetes.Interface, name string, withStatusResources bool) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	pods := cs.CoreV1().Pods("default")
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("35Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30m"), corev1.ResourceMemory: resource.MustParse("45Mi")},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c1", Image: "busybox", Resources: res}}}}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cst := corev1.ContainerStatus{Name: "c1", Image: "busybox",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}
	if withStatusResources {
		cst.Resources, cst.AllocatedResources = res.DeepCopy(), res.Requests.DeepCopy()
	}
	created.Status.Phase, created.Status.ContainerStatuses = corev1.PodRunning, []corev1.ContainerStatus{cst}
	out, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPodResizeSubresource: pods/resize reads the pod, and its update and patch change the containers'
// resources and resize policies — nothing else of the body — bumping the generation, while an update of the pod
// itself still may not change resources.
func TestPodResizeSubresource(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	pods := cs.CoreV1().Pods("default")
	pod := resizablePod(t, cs, "p", true)
	if pod.Generation != 1 {
		t.Fatalf("generation %d", pod.Generation)
	}

	var viaResize corev1.Pod
	if err := cs.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name("p").SubResource("resize").
		Do(ctx).Into(&viaResize); err != nil {
		t.Fatal(err)
	}
	if viaResize.Name != "p" || viaResize.ResourceVersion != pod.ResourceVersion || len(viaResize.Status.ContainerStatuses) != 1 {
		t.Fatalf("GET pods/p/resize: %+v", viaResize.ObjectMeta)
	}

	// A strategic merge patch, as kubectl patch --subresource=resize sends it; it also tries to change the image and
	// the labels, which a resize drops.
	patch := `{"metadata":{"labels":{"app":"y"}},"spec":{"containers":[{"name":"c1","image":"nginx",` +
		`"resources":{"requests":{"cpu":"25m"},"limits":{"cpu":"35m"}}}]}}`
	patched, err := pods.Patch(ctx, "p", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
	if err != nil {
		t.Fatal(err)
	}
	c := patched.Spec.Containers[0]
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.String() != "25m" || c.Resources.Limits.Cpu().String() != "35m" ||
		c.Resources.Requests.Memory().String() != "35Mi" {
		t.Errorf("resources after the patch: %v", c.Resources)
	}
	if c.Image != "busybox" || patched.Labels["app"] != "x" {
		t.Errorf("a resize changed more than resources: image %q labels %v", c.Image, patched.Labels)
	}
	if patched.Generation != 2 {
		t.Errorf("generation after a resize = %d, want 2", patched.Generation)
	}
	if len(patched.Status.ContainerStatuses) != 1 || patched.Status.ContainerStatuses[0].Resources == nil {
		t.Errorf("the resize dropped the status: %+v", patched.Status)
	}

	// The replace endpoint (UpdateResize) with the pod as read, its requests changed.
	cur, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("40Mi")
	updated, err := pods.UpdateResize(ctx, "p", cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Spec.Containers[0].Resources.Requests.Memory().String() != "40Mi" || updated.Generation != 3 {
		t.Errorf("after UpdateResize: %v generation %d", updated.Spec.Containers[0].Resources, updated.Generation)
	}
	// The same body again changes nothing: no new generation.
	again, err := pods.UpdateResize(ctx, "p", updated, metav1.UpdateOptions{})
	if err != nil || again.Generation != 3 {
		t.Errorf("a no-op resize: %v generation %d", err, again.Generation)
	}

	// The pod itself still refuses resource changes.
	updated.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("30m")
	if _, err := pods.Update(ctx, updated, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("an update of the pod's resources: %v, want 422", err)
	}
}

// TestPodResizeRefused: resizes upstream's ValidatePodResize refuses are 422 Invalid with the field causes, and
// leave the pod as it was.
func TestPodResizeRefused(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	pods := cs.CoreV1().Pods("default")
	resizablePod(t, cs, "p", true)
	resizablePod(t, cs, "old-node", false)
	for _, tc := range []struct {
		name, pod, patch string
		field, message   string
	}{
		{name: "QoS class changes", pod: "p",
			patch: `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"30m","memory":"45Mi"}}}]}}`,
			field: "spec", message: "Pod QOS Class may not change as a result of resizing"},
		{name: "limits removed", pod: "p",
			patch: `{"spec":{"containers":[{"name":"c1","resources":{"limits":{"cpu":null}}}]}}`,
			field: "spec.containers[0].resources.limits", message: "resource limits cannot be removed"},
		{name: "requests removed", pod: "p", // with the limit, else the limit would be the default request
			patch: `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"memory":null},"limits":{"memory":null}}}]}}`,
			field: "spec.containers[0].resources.requests", message: "resource requests cannot be removed"},
		{name: "another resource", pod: "p",
			patch: `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"ephemeral-storage":"1Gi"}}}]}}`,
			field: "spec", message: "only cpu and memory resources are mutable"},
		{name: "resize policy changed", pod: "p", // upstream's: the policy is not among what a resize may change
			patch: `{"spec":{"containers":[{"name":"c1","resizePolicy":[{"resourceName":"memory","restartPolicy":"RestartContainer"}]}]}}`,
			field: "spec", message: "only cpu and memory resources are mutable"},
		{name: "container renamed", pod: "p",
			patch: `{"spec":{"containers":[{"name":"c2","image":"busybox"},{"$patch":"delete","name":"c1"}]}}`,
			field: "spec.containers[0].name", message: "containers may not be renamed or reordered on resize"},
		{name: "node without resize", pod: "old-node",
			patch: `{"spec":{"containers":[{"name":"c1","resources":{"requests":{"cpu":"25m"}}}]}}`,
			field: "spec", message: "Pod running on node without support for resize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := pods.Get(ctx, tc.pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = pods.Patch(ctx, tc.pod, types.StrategicMergePatchType, []byte(tc.patch), metav1.PatchOptions{}, "resize")
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != 422 || se.ErrStatus.Reason != metav1.StatusReasonInvalid {
				t.Fatalf("patch: %v, want 422 Invalid", err)
			}
			found := false
			for _, c := range se.ErrStatus.Details.Causes {
				found = found || (c.Field == tc.field && strings.Contains(c.Message, tc.message))
			}
			if !found {
				t.Errorf("causes %+v, want %s: %s", se.ErrStatus.Details.Causes, tc.field, tc.message)
			}
			after, err := pods.Get(ctx, tc.pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("a refused resize changed the pod")
			}
		})
	}
}
