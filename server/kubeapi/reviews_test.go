package kubeapi

import (
	"net/http"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReviewAsTableIsNotAcceptable: a review asked for as a Table (or PartialObjectMetadata) is answered 406, as
// upstream's, whose reviews have no table convertor (the conformance test "should return a 406 for a backend which
// does not implement metadata"); asked for plainly, the same review is answered.
func TestReviewAsTableIsNotAcceptable(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}}}
	for _, accept := range []string{"application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"} {
		table := &metav1.Table{}
		err := cs.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").SetHeader("Accept", accept).
			Body(sar).Do(t.Context()).Into(table)
		var st apierrors.APIStatus
		if err == nil || !apierrors.IsNotAcceptable(err) {
			t.Fatalf("Accept %s: %v, want 406 NotAcceptable", accept, err)
		}
		if st, _ = err.(apierrors.APIStatus); st.Status().Code != http.StatusNotAcceptable {
			t.Errorf("Accept %s: code %d", accept, st.Status().Code)
		}
	}
	got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
	if err != nil || got.Status.Reason == "" && !got.Status.Allowed && !got.Status.Denied {
		t.Fatalf("plain review: %+v, %v", got, err)
	}
}
