package kubeapi

import (
	"context"
	"errors"
	"net/http"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
)

// RulesResolver lists the rules that apply to a user in a namespace ("" for cluster-wide rules only), for
// SelfSubjectRulesReview (`kubectl auth can-i --list`). Optional: without it the review answers incomplete.
type RulesResolver interface {
	Rules(ctx context.Context, cluster string, user User, namespace string) ([]rbacv1.PolicyRule, error)
}

// review answers a create of a Virtual resource: the access reviews and SelfSubjectReview. Nothing is stored.
func (rq *request) review() error {
	if rq.out.as != "" {
		// A review is not an object with metadata that lists or tables could show: upstream has no table
		// convertor for it and answers 406 (the conformance test "should return a 406 for a backend which does
		// not implement metadata").
		return statusErr(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			"the resource "+rq.res.Plural+" cannot be returned as "+rq.out.as)
	}
	obj, err := rq.decodeBody()
	if err != nil {
		return err
	}
	switch o := obj.(type) {
	case *authorizationv1.SelfSubjectAccessReview:
		spec := authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: o.Spec.ResourceAttributes,
			NonResourceAttributes: o.Spec.NonResourceAttributes}
		if err := rq.validateAccessSpec(spec, false, ""); err != nil {
			return err
		}
		if o.Status, err = rq.accessReview(rq.user, spec); err != nil {
			return err
		}
	case *authorizationv1.SubjectAccessReview:
		if err := rq.validateAccessSpec(o.Spec, true, ""); err != nil {
			return err
		}
		if o.Status, err = rq.accessReview(User{Name: o.Spec.User, UID: o.Spec.UID, Groups: o.Spec.Groups, Revision: rq.user.Revision}, o.Spec); err != nil {
			return err
		}
	case *authorizationv1.LocalSubjectAccessReview:
		o.Namespace = rq.info.namespace
		if err := rq.validateAccessSpec(o.Spec, true, rq.info.namespace); err != nil {
			return err
		}
		if o.Status, err = rq.accessReview(User{Name: o.Spec.User, UID: o.Spec.UID, Groups: o.Spec.Groups, Revision: rq.user.Revision}, o.Spec); err != nil {
			return err
		}
	case *authorizationv1.SelfSubjectRulesReview:
		if o.Status, err = rq.rulesReview(o.Spec.Namespace); err != nil {
			return err
		}
	case *authenticationv1.SelfSubjectReview:
		o.Status.UserInfo = userInfo(rq.user)
	case *authenticationv1.TokenReview:
		if o.Spec.Token == "" {
			return apierrors.NewBadRequest("token is required for TokenReview in authentication")
		}
		o.Status = rq.tokenReview(o.Spec)
	default:
		return internalf("no review for %T", obj)
	}
	setGVK(rq.res, obj)
	return rq.writeObject(http.StatusCreated, obj)
}

// tokenReview authenticates a token as a request to this cluster would be, for the audiences asked (none: the
// API's own). A token of another cluster, or of a platform user outside the cluster's team, is not authenticated.
func (rq *request) tokenReview(spec authenticationv1.TokenReviewSpec) authenticationv1.TokenReviewStatus {
	audiences := spec.Audiences
	if len(audiences) == 0 {
		audiences = []string{satoken.APIAudience}
	}
	u, err := rq.authenticateToken(spec.Token, audiences...)
	if err != nil {
		if !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, ErrClusterNotFound) {
			rq.api.log.Warn("token review failed", "cluster", rq.cluster.ID, "err", err)
		}
		return authenticationv1.TokenReviewStatus{Error: "token is not valid"}
	}
	st := authenticationv1.TokenReviewStatus{Authenticated: true, User: userInfo(u)}
	if satoken.LooksLikeJWT(spec.Token) {
		c, _ := satoken.UnverifiedAudiences(spec.Token)
		for _, a := range audiences {
			if slices.Contains(c, a) {
				st.Audiences = append(st.Audiences, a)
			}
		}
	} else {
		st.Audiences = []string{satoken.APIAudience}
	}
	return st
}

// userInfo is u as the authentication API shows a user.
func userInfo(u User) authenticationv1.UserInfo {
	ui := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		ui.Extra = make(map[string]authenticationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

// validateAccessSpec checks an access review as upstream: exactly one of resourceAttributes and
// nonResourceAttributes; a subject for the non-self reviews; a local review's namespace matches the URL.
func (rq *request) validateAccessSpec(spec authorizationv1.SubjectAccessReviewSpec, needsSubject bool, namespace string) error {
	var errs field.ErrorList
	p := field.NewPath("spec")
	switch {
	case spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil:
		errs = append(errs, field.Required(p.Child("resourceAttributes"), "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		errs = append(errs, field.Invalid(p.Child("nonResourceAttributes"), spec.NonResourceAttributes,
			"cannot be specified in combination with resourceAttributes"))
	}
	if needsSubject && spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(p.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	if namespace != "" && spec.ResourceAttributes != nil && spec.ResourceAttributes.Namespace != namespace {
		errs = append(errs, field.Invalid(p.Child("resourceAttributes", "namespace"), spec.ResourceAttributes.Namespace,
			"must match metadata.namespace"))
	}
	return invalid(rq.res, "", errs)
}

// accessReview asks the authorizer about user as it would for a real request.
func (rq *request) accessReview(user User, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	attrs := Attributes{User: user, Cluster: rq.cluster.ID}
	if ra := spec.ResourceAttributes; ra != nil {
		attrs.Verb, attrs.Group, attrs.Resource, attrs.Subresource = ra.Verb, ra.Group, ra.Resource, ra.Subresource
		attrs.Namespace, attrs.Name = ra.Namespace, ra.Name
	} else {
		attrs.Verb, attrs.Path = spec.NonResourceAttributes.Verb, spec.NonResourceAttributes.Path
	}
	ok, reason, err := rq.api.cfg.Authorizer.Authorize(rq.ctx, attrs)
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, internal(err)
	}
	return authorizationv1.SubjectAccessReviewStatus{Allowed: ok, Reason: reason}, nil
}

// rulesReview lists the caller's rules in namespace in the review's form.
func (rq *request) rulesReview(namespace string) (authorizationv1.SubjectRulesReviewStatus, error) {
	var st authorizationv1.SubjectRulesReviewStatus
	if rq.api.cfg.Rules == nil {
		st.Incomplete, st.EvaluationError = true, "this server cannot list rules"
		return st, nil
	}
	rules, err := rq.api.cfg.Rules.Rules(rq.ctx, rq.cluster.ID, rq.user, namespace)
	if err != nil {
		return st, internal(err)
	}
	st.ResourceRules, st.NonResourceRules = []authorizationv1.ResourceRule{}, []authorizationv1.NonResourceRule{}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: slices.Clone(r.Verbs),
				NonResourceURLs: slices.Clone(r.NonResourceURLs)})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: slices.Clone(r.Verbs),
			APIGroups: slices.Clone(r.APIGroups), Resources: slices.Clone(r.Resources), ResourceNames: slices.Clone(r.ResourceNames)})
	}
	return st, nil
}
