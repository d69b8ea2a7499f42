package kubeapi

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// scaleOf builds the autoscaling/v1 Scale of obj.
func scaleOf(res *resources.Resource, obj runtime.Object) *autoscalingv1.Scale {
	m := mustAccessor(obj)
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   res.Scale.Get(obj),
		Status: res.Scale.Status(obj),
	}
}

// serveScale serves get, update and patch of /scale.
func (rq *request) serveScale() error {
	res := rq.res
	if rq.info.verb == "get" {
		obj, _, err := rq.load(rq.info.namespace, rq.info.name)
		if err != nil {
			return err
		}
		rq.write(http.StatusOK, scaleOf(res, obj))
		return nil
	}
	body, err := rq.readBody()
	if err != nil {
		return err
	}
	pt := contentTypeOf(rq.r)
	// An update's body is in the request's format (typed clients send protobuf); a patch applies to JSON.
	dec := runtime.Decoder(storageCodec)
	if rq.info.verb == "update" {
		info, err := requestSerializer(rq.r.Header.Get("Content-Type"))
		if err != nil {
			return err
		}
		dec = info.Serializer
	}
	out, err := rq.updateLoop(0, func(old runtime.Object) (runtime.Object, error) {
		cur := scaleOf(res, old)
		next := &autoscalingv1.Scale{}
		var data []byte
		switch rq.info.verb {
		case "update":
			data = body
		default:
			var buf bytes.Buffer
			if err := storageCodec.Encode(cur, &buf); err != nil {
				return nil, internal(err)
			}
			p, err := patchJSON(pt, buf.Bytes(), body, &autoscalingv1.Scale{})
			if err != nil {
				return nil, err
			}
			data = p
		}
		if _, _, err := dec.Decode(data, &scaleGVK, next); err != nil {
			return nil, badRequestf("the body is not a valid Scale: %v", err)
		}
		if rv := next.ResourceVersion; rv != "" && rv != cur.ResourceVersion {
			return nil, storeConflict(rq)
		}
		if next.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(scaleGVK.GroupKind(), rq.info.name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), next.Spec.Replicas, "must be greater than or equal to 0")})
		}
		res.Scale.Set(old, next.Spec.Replicas)
		return old, nil
	})
	if err != nil {
		return err
	}
	rq.write(http.StatusOK, scaleOf(res, out))
	return nil
}

// patchJSON applies a JSON, merge or strategic merge patch to doc (dataStruct types the strategic patch).
func patchJSON(pt string, doc, patch []byte, dataStruct any) ([]byte, error) {
	var out []byte
	var err error
	switch pt {
	case jsonPatchType:
		p, derr := decodeJSONPatch(patch)
		if derr != nil {
			return nil, badRequestf("the JSON patch is not valid: %v", derr)
		}
		out, err = p.Apply(doc)
	case mergePatchType:
		out, err = mergePatch(doc, patch)
	case strategicPatchType:
		out, err = strategicPatch(doc, patch, dataStruct)
	default:
		return nil, unsupportedMediaType(pt)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest("the patch could not be applied: " + err.Error())
	}
	return out, nil
}

// serveBinding binds a pod to a node (POST pods/<name>/binding): sets spec.nodeName once and the PodScheduled
// condition. Binding a pod that already has a node is a 409.
func (rq *request) serveBinding() error {
	var b corev1.Binding
	gvk := corev1.SchemeGroupVersion.WithKind("Binding")
	if err := rq.decodeAs(gvk, &b); err != nil {
		return err
	}
	if b.Name != "" && b.Name != rq.info.name {
		return badRequestf("the Binding's name (%s) does not match the pod (%s)", b.Name, rq.info.name)
	}
	if b.Target.Name == "" || (b.Target.Kind != "" && b.Target.Kind != "Node") {
		return apierrors.NewInvalid(gvk.GroupKind(), rq.info.name, field.ErrorList{
			field.Required(field.NewPath("target", "name"), "a node to bind to is required")})
	}
	err := rq.rawUpdateLoop(func(old runtime.Object) (runtime.Object, error) {
		pod := old.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, pod.Name,
				fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods/binding"}, pod.Name,
				fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodScheduled(pod, rq.api.cfg.Now())
		return pod, nil
	})
	if err != nil {
		return err
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Code: http.StatusCreated}
	rq.write(http.StatusCreated, &st)
	return nil
}

// rawUpdateLoop writes what mutate makes of the stored object, bypassing the update strategy (for
// subresources that change fields the main resource may not, like pods/binding), retrying lost races. Its
// callers answer a Status, so the written object is not decoded again.
func (rq *request) rawUpdateLoop(mutate func(old runtime.Object) (runtime.Object, error)) error {
	return rq.casLoop(0, func(b updateBase) (bool, error) {
		obj, err := mutate(b.obj.DeepCopyObject())
		if err != nil {
			return false, err
		}
		_, _, unchanged, err := rq.storeWrite(obj, b.obj, b.rev, false) // the watch cache takes what it kept
		return unchanged, err
	})
}

// setPodScheduled sets the pod's PodScheduled condition to True.
func setPodScheduled(pod *corev1.Pod, now time.Time) {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)), ObservedGeneration: pod.Generation}
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			pod.Status.Conditions[i] = cond
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}
