package kubeapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Limits of TokenRequest.spec.expirationSeconds, as upstream's defaults (a pod's projected token is refreshed
// by the node well before it expires).
const (
	defaultTokenTTL = time.Hour
	minTokenTTL     = 10 * time.Minute
	maxTokenTTL     = 48 * time.Hour
)

var tokenRequestGK = schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}

// serveTokenRequest answers POST serviceaccounts/<name>/token (`kubectl create token`): a signed token for the
// service account, optionally bound to a pod, secret or node that must exist (and have the given UID).
func (rq *request) serveTokenRequest() error {
	if rq.api.cfg.ServiceAccountTokens == nil {
		return notFoundPath()
	}
	var tr authenticationv1.TokenRequest
	if err := rq.decodeAs(authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"), &tr); err != nil {
		return err
	}
	p := field.NewPath("spec")
	ttl := defaultTokenTTL
	var errs field.ErrorList
	if s := tr.Spec.ExpirationSeconds; s != nil {
		ttl = time.Duration(*s) * time.Second
		switch {
		case ttl < minTokenTTL:
			errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *s, "may not specify a duration less than 10 minutes"))
		case ttl > maxTokenTTL:
			errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *s, "may not specify a duration longer than 48 hours"))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(tokenRequestGK, rq.info.name, errs)
	}
	sa, _, err := rq.load(rq.info.namespace, rq.info.name)
	if err != nil {
		return err
	}
	account := sa.(*corev1.ServiceAccount)
	req := satoken.Request{Cluster: rq.cluster.ID, Namespace: rq.info.namespace, Audiences: tr.Spec.Audiences,
		Account: satoken.Ref{Name: account.Name, UID: string(account.UID)}, Expiration: ttl}
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		bound, err := rq.boundObject(ref)
		if err != nil {
			return err
		}
		switch ref.Kind {
		case "Pod":
			req.Pod = &bound
			if req.Node, err = rq.boundPodNode(bound.Name); err != nil {
				return err
			}
		case "Secret":
			req.Secret = &bound
		case "Node":
			req.Node = &bound
		}
	}
	token, exp, err := rq.api.cfg.ServiceAccountTokens.Issue(rq.ctx, req)
	if err != nil {
		return internal(err)
	}
	tr.TypeMeta = metav1.TypeMeta{Kind: "TokenRequest", APIVersion: authenticationv1.SchemeGroupVersion.String()}
	tr.Name, tr.Namespace = account.Name, account.Namespace
	tr.CreationTimestamp = metav1.NewTime(rq.api.cfg.Now())
	if len(tr.Spec.Audiences) == 0 {
		tr.Spec.Audiences = []string{satoken.APIAudience}
	}
	secs := int64(ttl / time.Second)
	tr.Spec.ExpirationSeconds = &secs
	tr.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
	rq.write(http.StatusCreated, &tr)
	return nil
}

// boundObject checks a TokenRequest's bound object: a pod or secret in the namespace, or a node, that exists
// and has the UID given (if one is).
func (rq *request) boundObject(ref *authenticationv1.BoundObjectReference) (satoken.Ref, error) {
	p := field.NewPath("spec", "boundObjectRef")
	var key store.Key
	switch {
	case ref.Kind == "Pod" && (ref.APIVersion == "" || ref.APIVersion == "v1"):
		key = store.Key{Cluster: rq.cluster.ID, Resource: "pods", Namespace: rq.info.namespace, Name: ref.Name}
	case ref.Kind == "Secret" && (ref.APIVersion == "" || ref.APIVersion == "v1"):
		key = store.Key{Cluster: rq.cluster.ID, Resource: "secrets", Namespace: rq.info.namespace, Name: ref.Name}
	case ref.Kind == "Node" && (ref.APIVersion == "" || ref.APIVersion == "v1"):
		key = store.Key{Cluster: rq.cluster.ID, Resource: "nodes", Name: ref.Name}
	default:
		return satoken.Ref{}, apierrors.NewInvalid(tokenRequestGK, rq.info.name, field.ErrorList{
			field.NotSupported(p.Child("kind"), ref.Kind, []string{"Pod", "Secret", "Node"})})
	}
	if ref.Name == "" {
		return satoken.Ref{}, apierrors.NewInvalid(tokenRequestGK, rq.info.name, field.ErrorList{
			field.Required(p.Child("name"), "the bound object's name is required")})
	}
	uid, _, err := rq.api.objectUID(rq.ctx, key)
	if err != nil {
		return satoken.Ref{}, err
	}
	if ref.UID != "" && string(ref.UID) != uid {
		return satoken.Ref{}, apierrors.NewConflict(schema.GroupResource{Resource: key.Resource}, ref.Name,
			errors.New("the UID in the bound object reference does not match the object's"))
	}
	return satoken.Ref{Name: ref.Name, UID: uid}, nil
}

// objectUID reads the UID and deletionTimestamp (nil unless being deleted) of a stored object; a missing
// object is a NotFound status.
func (a *API) objectUID(ctx context.Context, key store.Key) (string, *time.Time, error) {
	so, err := a.cfg.Storage.Get(ctx, key)
	if err != nil {
		return "", nil, storeError(err, schema.GroupResource{Resource: key.Resource}, key.Name)
	}
	var meta struct {
		Metadata struct {
			UID               string       `json:"uid"`
			DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	if err := jsonUnmarshal(so.Value, &meta); err != nil {
		return "", nil, internal(err)
	}
	if dt := meta.Metadata.DeletionTimestamp; dt != nil {
		return meta.Metadata.UID, &dt.Time, nil
	}
	return meta.Metadata.UID, nil, nil
}

// serviceAccountUser authenticates a ServiceAccount token presented to the request's cluster: a valid
// signature and claims, and a service account (and bound object) that still exist with the UIDs in the token
// and are not being deleted (satoken's Ended: upstream ends a token a minute past the deletionTimestamp of its
// pod, secret, node or service account, so a pod kept terminating by a finalizer loses its token).
func (rq *request) serviceAccountUser(token string, audiences ...string) (User, error) {
	c, err := rq.api.cfg.ServiceAccountTokens.Verify(rq.ctx, rq.cluster.ID, token, audiences...)
	if err != nil {
		// Invalid, or no key (an unknown cluster): either way the token is not valid here.
		return User{}, ErrUnauthenticated
	}
	k := c.Kubernetes
	type check struct {
		key store.Key
		uid string
	}
	checks := []check{{store.Key{Cluster: rq.cluster.ID, Resource: "serviceaccounts", Namespace: k.Namespace,
		Name: k.ServiceAccount.Name}, k.ServiceAccount.UID}}
	if k.Pod != nil {
		checks = append(checks, check{store.Key{Cluster: rq.cluster.ID, Resource: "pods", Namespace: k.Namespace, Name: k.Pod.Name}, k.Pod.UID})
	}
	if k.Secret != nil {
		checks = append(checks, check{store.Key{Cluster: rq.cluster.ID, Resource: "secrets", Namespace: k.Namespace, Name: k.Secret.Name}, k.Secret.UID})
	}
	if k.Node != nil && k.Pod == nil {
		// A pod's token names its node too (upstream's ServiceAccountTokenPodNodeInfo); the pod binds it.
		checks = append(checks, check{store.Key{Cluster: rq.cluster.ID, Resource: "nodes", Name: k.Node.Name}, k.Node.UID})
	}
	for _, ch := range checks {
		uid, deletion, err := rq.api.objectUID(rq.ctx, ch.key)
		var st apierrors.APIStatus
		if errors.As(err, &st) && st.Status().Code == http.StatusNotFound {
			return User{}, ErrUnauthenticated // the account or the bound object is gone: so is the token
		}
		if err != nil {
			return User{}, err
		}
		if uid != ch.uid {
			return User{}, ErrUnauthenticated // deleted and re-created: an old token does not carry over
		}
		if rq.api.cfg.ServiceAccountTokens.Ended(deletion) {
			return User{}, ErrUnauthenticated // being deleted (terminating): its tokens end with it
		}
	}
	rev, err := rq.api.cfg.Storage.CurrentRevision(rq.ctx)
	if err != nil {
		return User{}, err
	}
	u := User{Name: c.Subject, UID: k.ServiceAccount.UID, Revision: rev,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + k.Namespace, "system:authenticated"},
		Extra:  map[string][]string{extraCredentialID: {"JTI=" + c.ID}}}
	if k.Pod != nil {
		u.Extra[extraPodName], u.Extra[extraPodUID] = []string{k.Pod.Name}, []string{k.Pod.UID}
	}
	if k.Node != nil {
		u.Extra[extraNodeName], u.Extra[extraNodeUID] = []string{k.Node.Name}, []string{k.Node.UID}
	}
	return u, nil
}

// The user extras of a ServiceAccount token, as upstream names them.
const (
	extraCredentialID = "authentication.kubernetes.io/credential-id"
	extraPodName      = "authentication.kubernetes.io/pod-name"
	extraPodUID       = "authentication.kubernetes.io/pod-uid"
	extraNodeName     = "authentication.kubernetes.io/node-name"
	extraNodeUID      = "authentication.kubernetes.io/node-uid"
)

// boundPodNode is the node a pod a token is bound to runs on (name and UID), nil when it is not scheduled (or
// its node is gone): upstream puts it in the token too.
func (rq *request) boundPodNode(podName string) (*satoken.Ref, error) {
	so, err := rq.api.cfg.Storage.Get(rq.ctx, store.Key{Cluster: rq.cluster.ID, Resource: "pods", Namespace: rq.info.namespace, Name: podName})
	if err != nil {
		return nil, storeError(err, schema.GroupResource{Resource: "pods"}, podName)
	}
	var pod struct {
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	if err := jsonUnmarshal(so.Value, &pod); err != nil {
		return nil, internal(err)
	}
	if pod.Spec.NodeName == "" {
		return nil, nil
	}
	uid, _, err := rq.api.objectUID(rq.ctx, store.Key{Cluster: rq.cluster.ID, Resource: "nodes", Name: pod.Spec.NodeName})
	if apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &satoken.Ref{Name: pod.Spec.NodeName, UID: uid}, nil
}
