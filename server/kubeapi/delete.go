//lint:file-ignore SA1019 the deprecated orphanDependents option is still accepted, as upstream does

package kubeapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// deleteOptions reads DeleteOptions from the body (JSON or YAML) and the query.
func (rq *request) deleteOptions() (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	body, err := rq.readBody()
	if err != nil {
		return opts, err
	}
	if len(body) > 0 {
		info, err := requestSerializer(rq.r.Header.Get("Content-Type"))
		if err != nil {
			return opts, err
		}
		gvk := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		if _, _, err := info.Serializer.Decode(body, &gvk, &opts); err != nil {
			return opts, badRequestf("the body is not valid DeleteOptions: %v", err)
		}
	}
	q := rq.r.URL.Query()
	if v := q.Get("gracePeriodSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return opts, badRequestf("invalid gracePeriodSeconds %q", v)
		}
		opts.GracePeriodSeconds = &n
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := q.Get("orphanDependents"); v != "" {
		b := v == "true"
		opts.OrphanDependents = &b
	}
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			return opts, invalidDelete(fmt.Sprintf("propagationPolicy %q is not supported: want Orphan, Background or Foreground",
				*opts.PropagationPolicy))
		}
		if opts.OrphanDependents != nil {
			return opts, invalidDelete("orphanDependents and propagationPolicy cannot both be set")
		}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	return opts, nil
}

func invalidDelete(msg string) error {
	return apierrors.NewBadRequest(msg)
}

// delete serves DELETE of one object: preconditions, graceful pod deletion, propagation finalizers.
func (rq *request) delete() error {
	opts, err := rq.deleteOptions()
	if err != nil {
		return err
	}
	out, err := rq.deleteOne(rq.info.namespace, rq.info.name, opts)
	if err != nil {
		return err
	}
	return rq.writeObject(http.StatusOK, out)
}

func (rq *request) deleteOne(namespace, name string, opts metav1.DeleteOptions) (runtime.Object, error) {
	dry, err := rq.dryRun()
	if err != nil {
		return nil, err
	}
	if rq.res.Storage == "namespaces" && !dry {
		rq.api.liveNamespaces.add(rq.cluster.ID+"/"+name, rq.api.cfg.Now())
	}
	for attempt := 0; ; attempt++ {
		old, so, err := rq.load(namespace, name)
		if err != nil {
			return nil, err
		}
		out, err := rq.deleteStored(old, so, opts, dry)
		if errors.Is(err, errRetry) && rq.retryAfterConflict(attempt) {
			continue
		}
		if errors.Is(err, errRetry) {
			return nil, storeError(store.ErrConflict, rq.gr(), name)
		}
		return out, err
	}
}

func (rq *request) deleteStored(old runtime.Object, so store.Object, opts metav1.DeleteOptions, dry bool) (runtime.Object, error) {
	m := mustAccessor(old)
	if err := checkPreconditions(opts.Preconditions, m.GetUID(), m.GetResourceVersion(), rq, m.GetName()); err != nil {
		return nil, err
	}
	obj := old.DeepCopyObject()
	om := mustAccessor(obj)
	now := metav1.NewTime(rq.api.cfg.Now().Truncate(time.Second))
	if grace, graceful := podGrace(obj, opts); graceful && (om.GetDeletionTimestamp() == nil ||
		*om.GetDeletionGracePeriodSeconds() > grace) {
		deadline := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		bumpGenerationOnDeletion(om)
		om.SetDeletionTimestamp(&deadline)
		om.SetDeletionGracePeriodSeconds(&grace)
		addPropagationFinalizer(om, opts)
		return rq.storeUpdate(obj, old, so.Revision, dry)
	}
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		// A namespace with spec.finalizers turns Terminating; the namespace controller empties it, calls
		// /finalize and deletes it again.
		if ns.DeletionTimestamp != nil {
			//lint:ignore ST1005 upstream's message, which tools match
			return nil, apierrors.NewConflict(rq.gr(), ns.Name, errors.New("The system is ensuring all content is "+
				"removed from this namespace.  Upon completion, this namespace will automatically be purged by the system."))
		}
		zero := int64(0)
		ns.DeletionTimestamp, ns.DeletionGracePeriodSeconds = &now, &zero
		ns.Status.Phase = corev1.NamespaceTerminating
		addPropagationFinalizer(om, opts)
		return rq.storeUpdate(obj, old, so.Revision, dry)
	}
	addPropagationFinalizer(om, opts)
	if len(om.GetFinalizers()) > 0 {
		if om.GetDeletionTimestamp() == nil {
			zero := int64(0)
			bumpGenerationOnDeletion(om)
			om.SetDeletionTimestamp(&now)
			om.SetDeletionGracePeriodSeconds(&zero)
		}
		return rq.storeUpdate(obj, old, so.Revision, dry)
	}
	return rq.finishDelete(old, so.Revision, dry)
}

// bumpGenerationOnDeletion increments the generation of an object (one that has one) whose deletion begins: its
// controllers are to stop acting on it, a change they observe as any other, as upstream's.
func bumpGenerationOnDeletion(m metav1.Object) {
	if m.GetDeletionTimestamp() == nil && m.GetGeneration() > 0 {
		m.SetGeneration(m.GetGeneration() + 1)
	}
}

// podGrace returns the grace period of a pod deletion and whether it is graceful: only pods bound to a node
// and not finished wait for their agent; everything else goes at once.
func podGrace(obj runtime.Object, opts metav1.DeleteOptions) (int64, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0, false
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if opts.GracePeriodSeconds != nil {
		grace = *opts.GracePeriodSeconds
	}
	return grace, grace > 0
}

// addPropagationFinalizer adds the orphan or foregroundDeletion finalizer the propagation policy asks for.
func addPropagationFinalizer(m metav1.Object, opts metav1.DeleteOptions) {
	var f string
	switch {
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationOrphan,
		opts.OrphanDependents != nil && *opts.OrphanDependents:
		f = metav1.FinalizerOrphanDependents
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationForeground:
		f = metav1.FinalizerDeleteDependents
	default:
		return
	}
	if !contains(m.GetFinalizers(), f) {
		m.SetFinalizers(append(m.GetFinalizers(), f))
	}
}

func checkPreconditions(p *metav1.Preconditions, uid types.UID, rv string, rq *request, name string) error {
	if p == nil {
		return nil
	}
	if p.UID != nil && *p.UID != uid {
		//lint:ignore ST1005 upstream's message, which tools match
		return apierrors.NewConflict(rq.gr(), name, fmt.Errorf(
			"Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, uid))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != rv {
		//lint:ignore ST1005 upstream's message, which tools match
		return apierrors.NewConflict(rq.gr(), name, fmt.Errorf(
			"Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v",
			*p.ResourceVersion, rv))
	}
	return nil
}

// deleteCollection deletes every object matching the selectors, with the same options for each.
func (rq *request) deleteCollection() error {
	opts, err := rq.deleteOptions()
	if err != nil {
		return err
	}
	q := rq.r.URL.Query()
	sel, err := rq.selectors(q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		return err
	}
	items, rev, _, err := rq.listFiltered(store.ListOptions{Cluster: rq.cluster.ID, Resource: rq.res.Storage,
		Namespace: rq.info.namespace}, sel)
	if err != nil {
		return err
	}
	var deleted []runtime.Object
	for _, obj := range items {
		m := mustAccessor(obj)
		out, err := rq.deleteOne(m.GetNamespace(), m.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		deleted = append(deleted, out)
	}
	return rq.writeList(deleted, rev, "")
}
