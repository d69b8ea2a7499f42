package kubeapi

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// retryAfterConflict decides whether an unconditional write (update, patch, delete without preconditions) that
// lost a compare-and-swap race tries again: as upstream's GuaranteedUpdate, it keeps trying while the request
// lives, with a short jittered pause after the first few attempts so that writers of one hot object take turns
// rather than collide in lockstep.
func (rq *request) retryAfterConflict(attempt int) bool {
	if attempt < 4 {
		return rq.ctx.Err() == nil
	}
	pause := time.Duration(rand.Int64N(int64(min(attempt, 50)) * int64(time.Millisecond)))
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-rq.ctx.Done():
		return false
	}
}

// create serves POST of a new object.
func (rq *request) create() error {
	if rq.res.Virtual {
		return rq.review()
	}
	obj, err := rq.decodeBody()
	if err != nil {
		return err
	}
	m := mustAccessor(obj)
	if rq.res.Namespaced {
		if ns := m.GetNamespace(); ns != "" && ns != rq.info.namespace {
			return badRequestf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)",
				ns, rq.info.namespace)
		}
		m.SetNamespace(rq.info.namespace)
	} else {
		m.SetNamespace("")
	}
	if m.GetName() == "" && m.GetGenerateName() == "" {
		return invalid(rq.res, "", requiredName())
	}
	created, err := rq.createObject(obj)
	if err != nil {
		return err
	}
	return rq.writeObject(http.StatusCreated, created)
}

// createObject runs the create pipeline on a decoded object (POST, and PATCH/apply creating an object):
// namespace lifecycle, server-owned metadata, defaulting, mutating admission, validation, validating admission,
// managed fields, store.
func (rq *request) createObject(obj runtime.Object) (runtime.Object, error) {
	dry, err := rq.dryRun()
	if err != nil {
		return nil, err
	}
	manager, err := rq.fieldManager()
	if err != nil {
		return nil, err
	}
	m := mustAccessor(obj)
	if err := rq.checkNamespaceOpen(m.GetNamespace()); err != nil {
		return nil, err
	}
	prepareCreate(rq.res, obj, rq.api.cfg.Now())
	if rq.res.Default != nil {
		rq.res.Default(obj)
	}
	if err := rq.admit(admissionMutate, "CREATE", obj, nil); err != nil {
		return nil, err
	}
	if err := validateCreate(rq.res, obj); err != nil {
		return nil, err
	}
	if err := rq.admit(admissionValidate, "CREATE", obj, nil); err != nil {
		return nil, err
	}
	if !rq.applying() {
		fm, err := rq.api.managers.get(rq.res, "")
		if err != nil {
			return nil, internal(err)
		}
		obj = fm.UpdateNoErrors(rq.res.New(), obj, manager)
	}
	if dry {
		return obj, nil
	}
	took, err := rq.allocate(obj, nil)
	if err != nil {
		return nil, err
	}
	data, err := encodeStored(rq.res, obj)
	if err != nil {
		rq.api.release(rq.ctx, rq.cluster.ID, took)
		return nil, internal(err)
	}
	key := rq.key(rq.res, m.GetNamespace(), m.GetName())
	pw := rq.keepWrite(key, data)
	so, err := rq.api.cfg.Storage.Create(rq.ctx, key, data)
	if err != nil {
		rq.api.release(rq.ctx, rq.cluster.ID, took)
		return nil, storeError(err, rq.gr(), m.GetName())
	}
	return rq.writtenResult(pw, so)
}

// keepWrite decodes the bytes a create or an update is about to store and keeps the object for the watch cache
// (recentWrites); nil when they do not decode (the cache will say so itself).
func (rq *request) keepWrite(key store.Key, data []byte) *pendingWrite {
	obj, err := decodeStored(rq.res, store.Object{Key: key, Value: data})
	if err != nil {
		return nil
	}
	return rq.api.written.put(key, data, obj)
}

// writtenResult is what a create or an update stored, as its answer: a copy of the object kept for the cache
// (the stored bytes decoded), else the stored bytes decoded again.
func (rq *request) writtenResult(pw *pendingWrite, so store.Object) (runtime.Object, error) {
	rq.settle(so.Revision)
	if pw != nil {
		if obj, ok := rq.api.written.written(pw, so.Revision); ok {
			return obj.DeepCopyObject(), nil
		}
	}
	obj, err := decodeStored(rq.res, so)
	if err != nil {
		return nil, internal(err)
	}
	return obj, nil
}

// The two admission phases (Admission's two methods).
const (
	admissionMutate = iota
	admissionValidate
)

// admit runs one phase of the configured admission on a write.
func (rq *request) admit(phase int, op string, obj, old runtime.Object) error {
	adm := rq.api.cfg.Admission
	if adm == nil {
		return nil
	}
	m := mustAccessor(obj)
	req := AdmissionRequest{User: rq.user, Cluster: rq.cluster.ID, Operation: op,
		Resource: rq.res, Subresource: rq.info.subresource, Namespace: m.GetNamespace(), Name: m.GetName(),
		Object: obj, OldObject: old}
	var err error
	if phase == admissionMutate {
		err = adm.Admit(rq.ctx, req)
	} else {
		err = adm.Validate(rq.ctx, req)
	}
	var st apierrors.APIStatus
	if err != nil && !errors.As(err, &st) {
		return internal(err)
	}
	return err
}

// settle waits, after a write of an RBAC object, until this process's watch cache holds it: the authorizer
// reads RBAC objects from there, so the writer's next request is judged by the policy it just wrote.
func (rq *request) settle(rev int64) {
	if rq.res.GVK.Group != rbacv1.GroupName || rq.api.cache == nil {
		return
	}
	if col, err := rq.api.collection(rq.ctx, rq.cluster.ID, rq.res); err == nil {
		_ = col.WaitFor(rq.ctx, rev) // at worst (3 s without progress) the policy follows a moment later
	}
}

// checkNamespaceOpen refuses creating objects in a namespace that does not exist or is terminating.
func (rq *request) checkNamespaceOpen(ns string) error {
	if ns == "" || rq.namespaceFromCache(ns) {
		return nil
	}
	so, err := rq.api.cfg.Storage.Get(rq.ctx, store.Key{Cluster: rq.cluster.ID, Resource: "namespaces", Name: ns})
	if errors.Is(err, store.ErrNotFound) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)
	} else if err != nil {
		return storeError(err, schema.GroupResource{Resource: "namespaces"}, ns)
	}
	var nsObj corev1.Namespace
	if _, _, err := storageCodec.Decode(so.Value, nil, &nsObj); err != nil {
		return internal(err)
	}
	if nsObj.DeletionTimestamp != nil || nsObj.Status.Phase == corev1.NamespaceTerminating {
		return apierrors.NewForbidden(rq.gr(), "", fmt.Errorf(
			"unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

// update serves PUT of an object or its status.
func (rq *request) update() error {
	obj, err := rq.decodeBody()
	if err != nil {
		return err
	}
	m := mustAccessor(obj)
	if m.GetName() != rq.info.name {
		return badRequestf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), rq.info.name)
	}
	if rq.res.Namespaced && m.GetNamespace() != "" && m.GetNamespace() != rq.info.namespace {
		return badRequestf("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)",
			m.GetNamespace(), rq.info.namespace)
	}
	expect, err := parseRV(m.GetResourceVersion())
	if err != nil {
		return err
	}
	out, err := rq.updateLoop(expect, func(old runtime.Object) (runtime.Object, error) {
		o := obj.DeepCopyObject()
		if expect == 0 {
			// An update without a resourceVersion is unconditional, as upstream allows it for the built-in kinds
			// (AllowUnconditionalUpdate): it applies over whatever is stored, so it takes the stored revision.
			mustAccessor(o).SetResourceVersion(mustAccessor(old).GetResourceVersion())
		}
		return o, nil
	})
	if err != nil {
		return err
	}
	return rq.writeObject(http.StatusOK, out)
}

// updateLoop reads the stored object, computes the new one with mutate and writes it with compare-and-swap. With
// expect > 0 a stale revision is a 409; with expect == 0 (unconditional) a lost race is retried.
func (rq *request) updateLoop(expect int64, mutate func(old runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	var out runtime.Object
	err := rq.casLoop(expect, func(b updateBase) (noop bool, err error) {
		obj, err := mutate(b.obj.DeepCopyObject())
		if err != nil {
			return false, err
		}
		out, err = rq.updateObject(obj, b.obj, b.rev)
		return out == b.obj, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// casLoop runs write on the stored state (updateBase) until it succeeds, retrying lost races (expect == 0) or
// answering 409 (expect > 0, the client's revision). write reports a no-op: one computed from the cache's copy,
// like a refusal computed from it, is confirmed against the store's state before it is answered.
func (rq *request) casLoop(expect int64, write func(b updateBase) (noop bool, err error)) error {
	for attempt := 0; ; attempt++ {
		b, err := rq.updateBase(attempt, expect)
		if err != nil {
			return err
		}
		if expect > 0 && expect != b.rev {
			return storeConflict(rq)
		}
		noop, err := write(b)
		if err == nil && !(b.cached && noop) {
			return nil
		}
		if b.cached && (err == nil || !errors.Is(err, errRetry)) {
			continue // a no-op or a refusal computed from the cache's copy: confirm it with the store's
		}
		if errors.Is(err, errRetry) && expect == 0 && rq.retryAfterConflict(attempt) {
			continue
		}
		if errors.Is(err, errRetry) {
			return storeConflict(rq)
		}
		return err
	}
}

// updateBase is the state an update starts from. The first attempt starts from the watch cache's copy when a
// running collection holds one (at the client's revision, when it names one): it saves reading and decoding
// the object, and the compare-and-swap on its revision refuses it if the store moved on — upstream's
// GuaranteedUpdate starts from the cacher's object the same way. Later attempts, dry runs and Services (whose
// update reserves addresses from the old state) read the store.
func (rq *request) updateBase(attempt int, expect int64) (updateBase, error) {
	if dry, err := rq.dryRun(); attempt == 0 && err == nil && !dry && rq.res.GVK != serviceGVK {
		if obj, rev, ok := rq.cachedCopy(rq.info.namespace, rq.info.name); ok && (expect == 0 || expect == rev) {
			return updateBase{obj: obj, rev: rev, cached: true}, nil
		}
	}
	obj, so, err := rq.load(rq.info.namespace, rq.info.name)
	return updateBase{obj: obj, rev: so.Revision}, err
}

var serviceGVK = corev1.SchemeGroupVersion.WithKind("Service")

type updateBase struct {
	obj runtime.Object
	rev int64
	// cached: obj is the watch cache's copy, possibly behind the store. A write from it is safe (the
	// compare-and-swap fails if it is stale); an answer without a write — a no-op, a refusal — is not, so the
	// loops confirm those against the store.
	cached bool
}

// errRetry marks a compare-and-swap that lost a race.
var errRetry = errors.New("kubeapi: conflict")

// updateObject runs the update pipeline: server-owned metadata, status split, defaulting, mutating admission,
// generation, validation, validating admission, managed fields, finalizer completion, store. A no-op update writes nothing and returns the stored object.
func (rq *request) updateObject(obj, old runtime.Object, rev int64) (runtime.Object, error) {
	dry, err := rq.dryRun()
	if err != nil {
		return nil, err
	}
	manager, err := rq.fieldManager()
	if err != nil {
		return nil, err
	}
	sub := rq.info.subresource
	prepareUpdate(rq.res, obj, old, sub)
	if svc, ok := obj.(*corev1.Service); ok && sub == "" {
		dropTypeDependentFields(svc, old.(*corev1.Service))
	}
	if rq.res.Default != nil {
		rq.res.Default(obj)
	}
	// Mutating admission first, as upstream's: what it adds counts for the generation and for validation.
	if err := rq.admit(admissionMutate, "UPDATE", obj, old); err != nil {
		return nil, err
	}
	bumpGeneration(rq.res, obj, old)
	if svc, ok := obj.(*corev1.Service); ok {
		keepAddresses(svc, old.(*corev1.Service))
	}
	if err := validateUpdate(rq.res, obj, old, sub); err != nil {
		return nil, err
	}
	if err := rq.admit(admissionValidate, "UPDATE", obj, old); err != nil {
		return nil, err
	}
	if !rq.applying() {
		fm, err := rq.api.managers.get(rq.res, sub)
		if err != nil {
			return nil, internal(err)
		}
		obj = fm.UpdateNoErrors(old, obj, manager)
	}
	if mustAccessor(obj).GetDeletionTimestamp() != nil && !finalizersPending(obj) {
		return rq.finishDelete(obj, rev, dry)
	}
	if dry {
		return rq.storeUpdate(obj, old, rev, dry)
	}
	took, err := rq.allocate(obj, old)
	if err != nil {
		return nil, err
	}
	out, err := rq.storeUpdate(obj, old, rev, dry)
	if err != nil {
		rq.api.release(rq.ctx, rq.cluster.ID, took)
		return nil, err
	}
	if svc, ok := obj.(*corev1.Service); ok {
		rq.api.release(rq.ctx, rq.cluster.ID, droppedAllocations(svc, old.(*corev1.Service)))
	}
	return out, nil
}

// allocate reserves a Service's addresses (nothing for other kinds).
func (rq *request) allocate(obj, old runtime.Object) ([]allocation, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	var oldSvc *corev1.Service
	if old != nil {
		oldSvc = old.(*corev1.Service)
	}
	return rq.api.allocateService(rq.ctx, rq.cluster, svc, oldSvc)
}

// storeUpdate writes obj over revision rev, unless nothing changed (then it returns old itself).
func (rq *request) storeUpdate(obj, old runtime.Object, rev int64, dry bool) (runtime.Object, error) {
	so, pw, unchanged, err := rq.storeWrite(obj, old, rev, dry)
	switch {
	case err != nil:
		return nil, err
	case unchanged:
		return old, nil
	case dry:
		return obj, nil
	}
	return rq.writtenResult(pw, so)
}

// storeWrite is storeUpdate without its answer: unchanged when obj encodes as old does (nothing is written), a
// zero store.Object for a dry run; pw is what it kept for the watch cache (keepWrite).
func (rq *request) storeWrite(obj, old runtime.Object, rev int64, dry bool) (so store.Object, pw *pendingWrite, unchanged bool, err error) {
	data, err := encodeStored(rq.res, obj)
	if err != nil {
		return store.Object{}, nil, false, internal(err)
	}
	if oldData, err := encodeStored(rq.res, old); err == nil && string(oldData) == string(data) {
		return store.Object{}, nil, true, nil
	}
	if dry {
		return store.Object{}, nil, false, nil
	}
	m := mustAccessor(obj)
	key := rq.key(rq.res, m.GetNamespace(), m.GetName())
	pw = rq.keepWrite(key, data)
	so, err = rq.api.cfg.Storage.Update(rq.ctx, key, data, rev)
	if errors.Is(err, store.ErrConflict) {
		return store.Object{}, nil, false, errRetry
	}
	if err != nil {
		return store.Object{}, nil, false, storeError(err, rq.gr(), m.GetName())
	}
	return so, pw, false, nil
}

// finishDelete removes an object whose deletion was waiting for finalizers that are now gone.
func (rq *request) finishDelete(obj runtime.Object, rev int64, dry bool) (runtime.Object, error) {
	if dry {
		return obj, nil
	}
	m := mustAccessor(obj)
	so, err := rq.api.cfg.Storage.Delete(rq.ctx, rq.key(rq.res, m.GetNamespace(), m.GetName()), rev)
	if errors.Is(err, store.ErrConflict) {
		return nil, errRetry
	}
	if err != nil {
		return nil, storeError(err, rq.gr(), m.GetName())
	}
	if svc, ok := obj.(*corev1.Service); ok {
		rq.api.release(rq.ctx, rq.cluster.ID, serviceAllocations(svc))
	}
	rq.settle(so.Revision)
	out, err := decodeStored(rq.res, so) // not for the cache: a delete's value is not what the revision stored
	if err != nil {
		return nil, internal(err)
	}
	return out, nil
}

// applying reports whether the request is a server-side apply (whose field manager runs in the patch handler).
func (rq *request) applying() bool {
	return rq.info.verb == "patch" && contentTypeOf(rq.r) == "application/apply-patch+yaml"
}

func storeConflict(rq *request) error { return storeError(store.ErrConflict, rq.gr(), rq.info.name) }
