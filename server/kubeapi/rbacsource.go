package kubeapi

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
)

// RBACSource gives rbac.Authorizer each cluster's RBAC objects from this process's watch cache: the version is
// the revision of the last change of each of the four resources, read without touching PostgreSQL.
type RBACSource struct {
	api *API
	res [4]*resources.Resource // clusterroles, clusterrolebindings, roles, rolebindings
}

var (
	_ rbac.Source = (*RBACSource)(nil)
	_ rbac.Pods   = (*RBACSource)(nil)
)

// RBACSource returns the source of RBAC objects for an rbac.Authorizer; it needs the watch cache.
func (a *API) RBACSource() (*RBACSource, error) {
	if a.cache == nil {
		return nil, errNoCache
	}
	s := &RBACSource{api: a}
	for i, plural := range []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"} {
		r, ok := a.cfg.Registry.Lookup(schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: plural})
		if !ok {
			return nil, fmt.Errorf("kubeapi: the registry does not serve %s.%s", plural, rbacv1.GroupName)
		}
		s.res[i] = r
	}
	return s, nil
}

func (s *RBACSource) collections(ctx context.Context, cluster string) ([4]*watchcache.Collection, error) {
	var cols [4]*watchcache.Collection
	for i, r := range s.res {
		col, err := s.api.collection(ctx, cluster, r)
		if err != nil {
			return cols, err
		}
		cols[i] = col
	}
	return cols, nil
}

// Version is the revision of the last change of each RBAC resource in cluster.
func (s *RBACSource) Version(ctx context.Context, cluster string) (rbac.Version, error) {
	cols, err := s.collections(ctx, cluster)
	if err != nil {
		return rbac.Version{}, err
	}
	var v rbac.Version
	for i, col := range cols {
		v[i] = col.Changed()
	}
	return v, nil
}

// Objects returns the cluster's RBAC objects (shared with the cache: read-only) and their Version.
func (s *RBACSource) Objects(ctx context.Context, cluster string) (rbac.Objects, rbac.Version, error) {
	cols, err := s.collections(ctx, cluster)
	if err != nil {
		return rbac.Objects{}, rbac.Version{}, err
	}
	var objs rbac.Objects
	var v rbac.Version
	var entries [4][]*watchcache.Entry
	for i, col := range cols {
		entries[i], v[i] = col.ListChanged("")
	}
	for _, e := range entries[0] {
		objs.ClusterRoles = append(objs.ClusterRoles, e.Object.(*rbacv1.ClusterRole))
	}
	for _, e := range entries[1] {
		objs.ClusterRoleBindings = append(objs.ClusterRoleBindings, e.Object.(*rbacv1.ClusterRoleBinding))
	}
	for _, e := range entries[2] {
		objs.Roles = append(objs.Roles, e.Object.(*rbacv1.Role))
	}
	for _, e := range entries[3] {
		objs.RoleBindings = append(objs.RoleBindings, e.Object.(*rbacv1.RoleBinding))
	}
	return objs, v, nil
}

// PodsOnNode lists the pods bound to node in cluster from the watch cache (for the node authorizer), after the
// cache caught up with the store when fresh. The entries are shared: read-only.
func (s *RBACSource) PodsOnNode(ctx context.Context, cluster, node string, fresh bool) ([]*corev1.Pod, error) {
	res, ok := s.api.cfg.Registry.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	if !ok {
		return nil, fmt.Errorf("kubeapi: the registry does not serve pods")
	}
	var col *watchcache.Collection
	for attempt := 0; ; attempt++ {
		var err error
		if col, err = s.api.collection(ctx, cluster, res); err != nil {
			return nil, err
		}
		if !fresh {
			break
		}
		// The node's view must include a pod bound to it a moment ago (it is about to start it).
		err = col.Fresh(ctx)
		if err == nil || errors.Is(err, watchcache.ErrNotFresh) {
			break
		}
		if !errors.Is(err, watchcache.ErrReset) || attempt > 0 {
			return nil, err
		}
		// The collection was dropped (its store watch ended) while we waited: the next one is loading.
	}
	var out []*corev1.Pod
	if col.Indexed() {
		for _, e := range col.ListIndexed(cluster, node) {
			out = append(out, e.Object.(*corev1.Pod))
		}
		return out, nil
	}
	entries, _ := col.List("")
	for _, e := range entries {
		if p := e.Object.(*corev1.Pod); p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

// WaitFor returns once this process's RBAC collections of cluster have reached rev (the store revision of a
// request's authentication): a change to RBAC objects committed by any server before the request applies to
// it. Usually they are there already; otherwise it is one poll of the watch hub.
func (s *RBACSource) WaitFor(ctx context.Context, cluster string, rev int64) error {
	cols, err := s.collections(ctx, cluster)
	if err != nil {
		return err
	}
	for _, col := range cols {
		if err := col.WaitFor(ctx, rev); err != nil {
			return err
		}
	}
	return nil
}
