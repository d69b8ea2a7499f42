package kubeapi

import (
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// Impersonation headers, as kubectl's --as, --as-group and --as-uid send them.
const (
	headerImpersonateUser  = "Impersonate-User"
	headerImpersonateGroup = "Impersonate-Group"
	headerImpersonateUID   = "Impersonate-Uid"
)

const serviceAccountPrefix = "system:serviceaccount:"

// impersonate acts as the user named in the Impersonate-* headers when the caller may: the `impersonate` verb on
// users (or the serviceaccount), on each group and on the uid, checked one by one as upstream does. The
// impersonated user is authenticated (system:authenticated, and the service-account groups for a service
// account).
func (rq *request) impersonate() error {
	h := rq.r.Header
	name := h.Get(headerImpersonateUser)
	groups := h.Values(headerImpersonateGroup)
	uid := h.Get(headerImpersonateUID)
	if name == "" {
		if len(groups) > 0 || uid != "" {
			return badRequestf("requested %s or %s without impersonating a user (%s)", headerImpersonateGroup,
				headerImpersonateUID, headerImpersonateUser)
		}
		return nil
	}
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Impersonate-Extra-") {
			return badRequestf("impersonating extra user information (%s) is not supported", k)
		}
	}
	check := []Attributes{{Verb: "impersonate", Resource: "users", Name: name}}
	if ns, sa, ok := strings.Cut(strings.TrimPrefix(name, serviceAccountPrefix), ":"); ok && strings.HasPrefix(name, serviceAccountPrefix) {
		check[0] = Attributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ns, Name: sa}
	}
	for _, g := range groups {
		check = append(check, Attributes{Verb: "impersonate", Resource: "groups", Name: g})
	}
	if uid != "" {
		check = append(check, Attributes{Verb: "impersonate", Group: authenticationv1.GroupName, Resource: "uids", Name: uid})
	}
	for _, a := range check {
		if err := rq.authorize(a); err != nil {
			return err
		}
	}
	u := User{Name: name, UID: uid, Groups: slices.Clone(groups), Revision: rq.user.Revision}
	if ns, _, ok := strings.Cut(strings.TrimPrefix(name, serviceAccountPrefix), ":"); ok && strings.HasPrefix(name, serviceAccountPrefix) {
		u.Groups = appendMissing(u.Groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	}
	if name != "system:anonymous" {
		u.Groups = appendMissing(u.Groups, "system:authenticated")
	}
	rq.user = u
	return nil
}

func appendMissing(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}
