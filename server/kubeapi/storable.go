package kubeapi

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// notStorableMsg says why a name cannot be stored (store.ValidKeyPart).
const notStorableMsg = "must be valid UTF-8 without NUL bytes, and at most 1024 bytes"

// checkStorable answers a request whose URL names a namespace or an object that no store key can hold (a NUL
// byte, invalid UTF-8, over store.MaxKeyPart bytes): nothing can exist there, so it is 404 NotFound for the
// object named, as upstream answers for a name it has not stored, or, for a collection in such a namespace,
// for the namespace (upstream's answer to a create there). Never a store error.
func (rq *request) checkStorable() error {
	ri := rq.info
	switch {
	case ri.name != "" && (!store.ValidKeyPart(ri.name) || !store.ValidKeyPart(ri.namespace)):
		return apierrors.NewNotFound(rq.gr(), ri.name)
	case !store.ValidKeyPart(ri.namespace):
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ri.namespace)
	}
	return nil
}

// storableName wraps a name validation: a name it accepts must also fit a store key (upstream's path-segment
// names, of RBAC objects for example, allow NUL and any length; PostgreSQL text does not). A create with such
// a name is 422 Invalid on metadata.name, like any other name its kind refuses.
func storableName(fn apivalidation.ValidateNameFunc) apivalidation.ValidateNameFunc {
	return func(name string, prefix bool) []string {
		if errs := fn(name, prefix); len(errs) > 0 {
			return errs
		}
		if !store.ValidKeyPart(name) { // a generateName's name is checked once generated

			return []string{notStorableMsg}
		}
		return nil
	}
}
