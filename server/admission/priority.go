// Package admission holds the Kubernetes API's admission steps that change or refuse objects before they are
// stored, after defaulting and validation (kubeapi.Admission), named after the upstream admission plugins they
// mirror.
package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
)

// PriorityClasses looks up a cluster's PriorityClasses: one by name, and the global default (nil if none).
type PriorityClasses interface {
	PriorityClass(ctx context.Context, cluster, name string) (*schedulingv1.PriorityClass, bool, error)
	GlobalDefault(ctx context.Context, cluster string) (*schedulingv1.PriorityClass, error)
}

// Priority is upstream's Priority admission plugin for pods: at creation, spec.priorityClassName (or the
// cluster's globalDefault PriorityClass, or none: priority 0) sets spec.priority and spec.preemptionPolicy. A
// class that does not exist is refused (403, as upstream); so is a spec.priority that disagrees with the class.
type Priority struct{ Classes PriorityClasses }

var podsGR = schema.GroupResource{Resource: "pods"}

// Admit resolves the priority of a pod being created.
func (p Priority) Admit(ctx context.Context, req kubeapi.AdmissionRequest) error {
	pod, ok := req.Object.(*corev1.Pod)
	if !ok || req.Operation != "CREATE" || req.Subresource != "" {
		return nil
	}
	var class *schedulingv1.PriorityClass
	if name := pod.Spec.PriorityClassName; name != "" {
		c, found, err := p.Classes.PriorityClass(ctx, req.Cluster, name)
		if err != nil {
			return err
		}
		if !found {
			return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("no PriorityClass with name %s was found", name))
		}
		class = c
	} else {
		c, err := p.Classes.GlobalDefault(ctx, req.Cluster)
		if err != nil {
			return err
		}
		if c != nil {
			class = c
			pod.Spec.PriorityClassName = c.Name
		}
	}
	var value int32
	policy := corev1.PreemptLowerPriority
	if class != nil {
		value = class.Value
		if class.PreemptionPolicy != nil {
			policy = *class.PreemptionPolicy
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; "+
			"priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value))
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != policy && class != nil && class.PreemptionPolicy != nil {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, field.ErrorList{field.Invalid(
			field.NewPath("spec", "preemptionPolicy"), *pod.Spec.PreemptionPolicy,
			fmt.Sprintf("must be %s, the preemptionPolicy of PriorityClass %s", policy, class.Name))})
	}
	pod.Spec.Priority = &value
	if pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = &policy
	}
	return nil
}

// CachedPriorityClasses reads PriorityClasses from the API's watch cache, catching up with the store before it
// answers "not found" (a class created a moment ago is found).
type CachedPriorityClasses struct {
	API *kubeapi.API
	Res *resources.Resource // priorityclasses.scheduling.k8s.io
}

func (c CachedPriorityClasses) collection(ctx context.Context, cluster string) (*watchcache.Collection, error) {
	return c.API.Collection(ctx, cluster, c.Res)
}

// PriorityClass finds a class by name.
func (c CachedPriorityClasses) PriorityClass(ctx context.Context, cluster, name string) (*schedulingv1.PriorityClass, bool, error) {
	col, err := c.collection(ctx, cluster)
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
	return e.Object.(*schedulingv1.PriorityClass), true, nil
}

// GlobalDefault is the class with globalDefault set (the lowest value if several, as upstream), or nil.
func (c CachedPriorityClasses) GlobalDefault(ctx context.Context, cluster string) (*schedulingv1.PriorityClass, error) {
	col, err := c.collection(ctx, cluster)
	if err != nil {
		return nil, err
	}
	entries, _ := col.ListIn(cluster, "")
	var best *schedulingv1.PriorityClass
	for _, e := range entries {
		pc := e.Object.(*schedulingv1.PriorityClass)
		if pc.GlobalDefault && (best == nil || pc.Value < best.Value) {
			best = pc
		}
	}
	return best, nil
}
