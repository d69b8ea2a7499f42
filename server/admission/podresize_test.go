package admission

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

// nodes is an in-memory set of Nodes.
type nodes map[string]*corev1.Node

func (n nodes) Node(_ context.Context, _, name string) (*corev1.Node, bool, error) {
	node, ok := n[name]
	return node, ok, nil
}

func TestPodResize(t *testing.T) {
	node := func(name, os string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelOSStable: os}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
				corev1.ResourceMemory: resource.MustParse("4Gi")}}}
	}
	known := nodes{"n1": node("n1", "linux"), "w1": node("w1", "windows")}
	pod := func(nodeName, cpu, mem string, generation int64) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: generation}, Spec: corev1.PodSpec{NodeName: nodeName,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}
	}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		subresource string
		want        string // "" when admitted
		cause       metav1.CauseType
	}{
		{name: "fits", pod: pod("n1", "2", "4Gi", 2), subresource: "resize"},
		{name: "cpu above allocatable", pod: pod("n1", "3", "1Gi", 2), subresource: "resize",
			want: "node didn't have enough allocatable resources: cpu, requested: 3000, allocatable: 2000", cause: CauseNodeCapacity},
		{name: "both above allocatable", pod: pod("n1", "3", "5Gi", 2), subresource: "resize",
			want: "cpu, requested: 3000, allocatable: 2000; memory, requested: 5368709120, allocatable: 4294967296", cause: CauseNodeCapacity},
		{name: "windows node", pod: pod("w1", "1", "1Gi", 2), subresource: "resize",
			want: `pod resize is only supported on linux nodes, node "w1" is "windows"`, cause: CauseUnsupportedPlatform},
		{name: "unknown node", pod: pod("gone", "1", "1Gi", 2), subresource: "resize", want: `node "gone" not found`},
		{name: "unbound pod", pod: pod("", "9", "1Gi", 2), subresource: "resize"},
		{name: "no spec change", pod: pod("n1", "9", "1Gi", 1), subresource: "resize"},
		{name: "not a resize", pod: pod("n1", "9", "1Gi", 2), subresource: "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := pod(tc.pod.Spec.NodeName, "1", "1Gi", 1)
			err := PodResize{Nodes: known}.Validate(t.Context(), kubeapi.AdmissionRequest{Operation: "UPDATE",
				Subresource: tc.subresource, Object: tc.pod, OldObject: old})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Reason != metav1.StatusReasonForbidden || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want 403 with %q", err, tc.want)
			}
			if tc.cause != "" && (len(se.ErrStatus.Details.Causes) == 0 || se.ErrStatus.Details.Causes[0].Type != tc.cause) {
				t.Errorf("causes %+v, want %s", se.ErrStatus.Details.Causes, tc.cause)
			}
		})
	}
}
