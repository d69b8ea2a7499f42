package main

import (
	"context"
	"log/slog"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// revocation acts, in this replica, on every change that takes access away anywhere (the access event log of
// tenancy.FollowAccessEvents): a deleted cluster's tunnels close, its long-running requests end and every
// per-cluster cache forgets it; a revoked node credential's tunnel and requests are checked again; a user who
// lost some access has their long-running requests checked again. See docs/design/revocation.md.
type revocation struct {
	tunnels *tunnel.Registry
	api     *kubeapi.API
	// forget drops a deleted cluster from the other per-cluster caches of this process (tenancy's cluster
	// cache, the audit path's cluster → team map, RBAC's, the ServiceAccount keys', the cluster CAs').
	forget []func(cluster string)
	log    *slog.Logger
}

// handle acts on one event. It blocks while the re-checks it starts run (one database query each).
func (r *revocation) handle(ctx context.Context, e tenancy.AccessEvent) {
	switch e.Kind {
	case tenancy.AccessCluster:
		r.log.Info("cluster deleted; closing its tunnels and requests, forgetting it", "cluster", e.Cluster)
		r.tunnels.CloseCluster(e.Cluster)
		r.api.ForgetCluster(e.Cluster)
		for _, f := range r.forget {
			f(e.Cluster)
		}
	case tenancy.AccessNode:
		r.tunnels.Recheck(ctx, func(k tunnel.Key) bool { return k.Cluster == e.Cluster && k.Node == e.Subject })
		user := rbac.NodeUserPrefix + e.Subject
		r.api.RecheckLongRunning(ctx, func(cluster string, u kubeapi.User) bool { return cluster == e.Cluster && u.Name == user })
	case tenancy.AccessUser:
		r.api.RecheckLongRunning(ctx, func(_ string, u kubeapi.User) bool { return u.UID == e.Subject })
	}
}

// follow runs the revocation for every access event until ctx ends; started is called once every change
// committed after it will be acted on.
func (r *revocation) follow(ctx context.Context, ten *tenancy.Store, started func()) {
	_ = ten.FollowAccessEvents(ctx, tenancy.AccessFollowConfig{Started: started}, func(e tenancy.AccessEvent) {
		r.handle(ctx, e)
	})
}
