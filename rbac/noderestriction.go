package rbac

import (
	"fmt"
	"reflect"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// restrictedLabelPrefix marks labels a node may not set on itself (upstream's NodeRestriction): they are for
// the cluster's administrators to steer workloads with, so a compromised node must not claim them.
const restrictedLabelPrefix = "node-restriction.kubernetes.io/"

// CheckNodeRestriction is upstream's NodeRestriction admission for writes by a node (user system:node:<name>):
// it may create and change only its own Node and Lease, may not change its Node's taints once registered, and
// may not set node-restriction.kubernetes.io/ labels. Of a pod (which the node authorizer lets it write only
// through pods/status, and only of pods bound to it) it may change the status and nothing else: upstream
// refuses a change of labels ("cannot update labels through pod status": a node that relabels its pod draws a
// Service's traffic), and so does this check, and, stricter than upstream, any other change of metadata
// (annotations, finalizers, owner references) too — kubelet writes none of them. Writes by anyone else, or of
// other kinds, pass. op is CREATE or UPDATE; old is nil on CREATE.
func CheckNodeRestriction(user string, groups []string, op string, obj, old runtime.Object) error {
	node, ok := NodeName(user, groups)
	if !ok {
		return nil
	}
	switch o := obj.(type) {
	case *corev1.Node:
		gr := schema.GroupResource{Resource: "nodes"}
		if o.Name != node {
			return apierrors.NewForbidden(gr, o.Name, fmt.Errorf("node %q is not allowed to modify node %q", node, o.Name))
		}
		var oldLabels map[string]string
		if prev, ok := old.(*corev1.Node); ok {
			if !reflect.DeepEqual(normTaints(prev.Spec.Taints), normTaints(o.Spec.Taints)) {
				return apierrors.NewForbidden(gr, o.Name, fmt.Errorf("node %q is not allowed to modify taints", node))
			}
			oldLabels = prev.Labels
		}
		for k, v := range o.Labels {
			if strings.HasPrefix(k, restrictedLabelPrefix) && oldLabels[k] != v {
				return apierrors.NewForbidden(gr, o.Name, fmt.Errorf("node %q is not allowed to set the label %s", node, k))
			}
		}
		for k := range oldLabels {
			if _, kept := o.Labels[k]; !kept && strings.HasPrefix(k, restrictedLabelPrefix) {
				return apierrors.NewForbidden(gr, o.Name, fmt.Errorf("node %q is not allowed to remove the label %s", node, k))
			}
		}
	case *corev1.Pod:
		if prev, ok := old.(*corev1.Pod); ok {
			return checkPodStatusOnly(node, o, prev)
		}
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, o.Name,
			fmt.Errorf("node %q may not create pods", node))
	case *coordinationv1.Lease:
		if o.Namespace != "kube-node-lease" || o.Name != node {
			return apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, o.Name,
				fmt.Errorf("node %q may only write its own lease kube-node-lease/%s", node, node))
		}
	}
	return nil
}

func normTaints(ts []corev1.Taint) []corev1.Taint {
	if len(ts) == 0 {
		return nil
	}
	out := make([]corev1.Taint, len(ts))
	for i, t := range ts {
		t.TimeAdded = nil // set by the server, not a change the node made
		out[i] = t
	}
	return out
}

// checkPodStatusOnly refuses a node's pod update that changes metadata (its spec is the stored one: the
// pods/status strategy keeps it). What the server sets itself (resourceVersion, managed fields, generation) is
// not the node's change.
func checkPodStatusOnly(node string, pod, old *corev1.Pod) error {
	forbid := func(what string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name,
			fmt.Errorf("node %q cannot update %s through pod status", node, what))
	}
	m, o := pod.ObjectMeta, old.ObjectMeta
	switch {
	case !labels.Equals(m.Labels, o.Labels):
		return forbid("labels") // upstream's message
	case !labels.Equals(m.Annotations, o.Annotations):
		return forbid("annotations")
	case !apiequality.Semantic.DeepEqual(normStrings(m.Finalizers), normStrings(o.Finalizers)):
		return forbid("finalizers")
	case !apiequality.Semantic.DeepEqual(m.OwnerReferences, o.OwnerReferences):
		return forbid("owner references")
	}
	// The rest of the metadata; the spec is the stored one already (the status strategy keeps it).
	a, b := m.DeepCopy(), o.DeepCopy()
	for _, x := range []*metav1.ObjectMeta{a, b} {
		x.ResourceVersion, x.ManagedFields, x.Generation = "", nil, 0
	}
	if !apiequality.Semantic.DeepEqual(a, b) {
		return forbid("metadata")
	}
	return nil
}

func normStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
