package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// Causes of a refused resize, as upstream's PodResizeValidator reports them in the Status's details.
const (
	CauseNodeCapacity        metav1.CauseType = "NodeCapacity"
	CauseUnsupportedPlatform metav1.CauseType = "UnsupportedPlatform"
)

// Nodes looks up a cluster's Nodes by name.
type Nodes interface {
	Node(ctx context.Context, cluster, name string) (*corev1.Node, bool, error)
}

// PodResize is upstream's PodResizeValidator admission plugin: a resize (an update of pods/resize that changes
// the spec) of a pod bound to a node is refused (403) when the node is not a Linux node, or when the pod's
// requests would exceed the node's allocatable cpu or memory — a resize that could never be admitted there,
// which the kubelet would otherwise leave pending forever.
type PodResize struct{ Nodes Nodes }

// Validate checks a resize against the pod's node (a validating step: it changes nothing).
func (p PodResize) Validate(ctx context.Context, req kubeapi.AdmissionRequest) error {
	pod, ok := req.Object.(*corev1.Pod)
	if !ok || req.Operation != "UPDATE" || req.Subresource != "resize" || pod.Spec.NodeName == "" {
		return nil
	}
	if old, ok := req.OldObject.(*corev1.Pod); ok && old.Generation == pod.Generation {
		return nil // the spec did not change
	}
	node, found, err := p.Nodes.Node(ctx, req.Cluster, pod.Spec.NodeName)
	if err != nil {
		return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("failed to get node %q: %w", pod.Spec.NodeName, err))
	}
	if !found {
		return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("node %q not found", pod.Spec.NodeName))
	}
	if os, ok := node.Labels[corev1.LabelOSStable]; ok && os != "linux" {
		return resizeRefused(pod.Name, fmt.Errorf("pod resize is only supported on linux nodes, node %q is %q", node.Name, os),
			CauseUnsupportedPlatform)
	}
	if err := withinAllocatable(pod, node.Status.Allocatable); err != nil {
		return resizeRefused(pod.Name, err, CauseNodeCapacity)
	}
	return nil
}

// withinAllocatable refuses requests above the node's allocatable cpu or memory, with upstream's message.
func withinAllocatable(pod *corev1.Pod, allocatable corev1.ResourceList) error {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpu, mem := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]
	var msg []string
	if cpu.Cmp(*allocatable.Cpu()) > 0 {
		msg = append(msg, fmt.Sprintf("cpu, requested: %d, allocatable: %d", cpu.MilliValue(), allocatable.Cpu().MilliValue()))
	}
	if mem.Cmp(*allocatable.Memory()) > 0 {
		msg = append(msg, fmt.Sprintf("memory, requested: %d, allocatable: %d", mem.Value(), allocatable.Memory().Value()))
	}
	if len(msg) > 0 {
		return errors.New("node didn't have enough allocatable resources: " + strings.Join(msg, "; "))
	}
	return nil
}

// resizeRefused is a 403 with the cause telling why, as upstream's resizeValidationError.
func resizeRefused(name string, err error, cause metav1.CauseType) error {
	st := apierrors.NewForbidden(podsGR, name, err)
	st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{Type: cause})
	return st
}

// CachedNodes reads Nodes from the API's watch cache, catching up with the store before it answers "not found".
type CachedNodes struct {
	API *kubeapi.API
	Res *resources.Resource // nodes
}

// Node finds a node by name.
func (c CachedNodes) Node(ctx context.Context, cluster, name string) (*corev1.Node, bool, error) {
	col, err := c.API.Collection(ctx, cluster, c.Res)
	if err != nil {
		return nil, false, err
	}
	e, ok, _ := col.GetIn(cluster, "", name)
	if !ok {
		if err := col.Fresh(ctx); err != nil {
			return nil, false, err
		}
		if e, ok, _ = col.GetIn(cluster, "", name); !ok {
			return nil, false, nil
		}
	}
	return e.Object.(*corev1.Node), true, nil
}
