package resources

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The access reviews (`kubectl auth can-i`, `kubectl auth can-i --list`), SelfSubjectReview (`kubectl auth
// whoami`) and TokenReview (webhook token authentication, kube-rbac-proxy, the metrics servers of operators):
// created, answered by the API from the authorizer or the authenticator, never stored.
func init() {
	review := func(kind, plural string, namespaced bool, newObj func() runtime.Object) *Resource {
		return &Resource{GVK: authorizationv1.SchemeGroupVersion.WithKind(kind), Plural: plural, Namespaced: namespaced,
			New: newObj, Virtual: true, Verbs: []string{"create"}}
	}
	register(review("SelfSubjectAccessReview", "selfsubjectaccessreviews", false,
		func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }))
	register(review("SelfSubjectRulesReview", "selfsubjectrulesreviews", false,
		func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }))
	register(review("SubjectAccessReview", "subjectaccessreviews", false,
		func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }))
	register(review("LocalSubjectAccessReview", "localsubjectaccessreviews", true,
		func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }))
	register(&Resource{GVK: authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"), Plural: "selfsubjectreviews",
		New: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, Virtual: true, Verbs: []string{"create"}})
	register(&Resource{GVK: authenticationv1.SchemeGroupVersion.WithKind("TokenReview"), Plural: "tokenreviews",
		New: func() runtime.Object { return &authenticationv1.TokenReview{} }, Virtual: true, Verbs: []string{"create"}})
}
