package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// storeError turns a store error about one object into the Kubernetes API error clients expect. gr and name say
// which object the request concerned. Errors that are not the caller's fault become an InternalError whose
// message does not include internals (the original is logged by the caller through errInternal).
func storeError(err error, gr schema.GroupResource, name string) error {
	var ae *store.AmbiguousError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, store.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, store.ErrConflict):
		return apierrors.NewConflict(gr, name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	case errors.Is(err, store.ErrCompacted):
		return apierrors.NewResourceExpired("too old resource version: the requested revision has been compacted")
	case errors.Is(err, store.ErrFutureRevision):
		return apierrors.NewTimeoutError("Too large resource version", 1)
	case errors.Is(err, store.ErrBadContinue):
		return apierrors.NewBadRequest("the provided continue parameter is not valid")
	case errors.As(err, &ae):
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGatewayTimeout,
			Reason:  metav1.StatusReasonTimeout,
			Message: "the write may or may not have been applied: the database connection was lost while committing; read the object to find out",
			Details: &metav1.StatusDetails{Name: name, Group: gr.Group, Kind: gr.Resource, RetryAfterSeconds: 1}}}
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrClosed):
		return apierrors.NewServiceUnavailable("the object store is unavailable; retry shortly")
	case errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError("the request did not finish in time", 1)
	case errors.Is(err, context.Canceled):
		return err
	}
	return internal(err)
}

// internalError is a 500 whose cause is logged but never shown.
type internalError struct{ err error }

func (e *internalError) Error() string { return e.err.Error() }
func (e *internalError) Unwrap() error { return e.err }

func internal(err error) error { return &internalError{err: err} }

func internalf(format string, args ...any) error { return internal(fmt.Errorf(format, args...)) }

// statusFor returns the Status body for err. Internal errors get a generic message.
func statusFor(err error) metav1.Status {
	if errors.Is(err, watchcache.ErrReset) || errors.Is(err, watchcache.ErrClosed) {
		// A read of the watch cache met a collection being reloaded (or the cache stopping): retryable.
		err = apierrors.NewServiceUnavailable("the server's cache is reloading; retry shortly")
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		st.Kind, st.APIVersion = "Status", "v1"
		return st
	}
	return metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: "Internal error occurred: the server could not complete the request; its log has the details"}
}

// badRequestf is a 400 with a formatted message.
func badRequestf(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}
