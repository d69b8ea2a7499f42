package tenancy

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is one Kubernetes cluster, owned by a team.
type Cluster struct {
	ID          string
	TeamID      string
	Name        string
	ServiceCIDR netip.Prefix
	PodCIDR     netip.Prefix
	CreatedAt   time.Time
}

const clusterColumns = `id, team_id, name, service_cidr, pod_cidr, created_at`

func scanCluster(r pgx.Row) (Cluster, error) {
	var c Cluster
	err := r.Scan(&c.ID, &c.TeamID, &c.Name, &c.ServiceCIDR, &c.PodCIDR, &c.CreatedAt)
	return c, err
}

// Cluster returns cluster id, from the cache when it was read within Config.CacheTTL, so it is cheap enough for
// every API request; a deleted cluster may therefore be returned for up to CacheTTL. An unknown id, or one that
// is not a valid id (ValidID), is ErrNotFound.
func (s *Store) Cluster(ctx context.Context, id string) (Cluster, error) {
	if !ValidID(id) {
		return Cluster{}, fmt.Errorf("tenancy: cluster %q: %w", id, ErrNotFound)
	}
	if c, ok := s.clusters.get(id); ok {
		return c, nil
	}
	c, err := scanCluster(s.pool.QueryRow(ctx, `SELECT `+clusterColumns+` FROM clusters WHERE id = $1`, id))
	if err != nil {
		return Cluster{}, translate(fmt.Sprintf("cluster %q", id), err)
	}
	s.clusters.put(id, c)
	return c, nil
}

// Clusters lists every cluster of every team, by id, from the database.
func (s *Store) Clusters(ctx context.Context) ([]Cluster, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+clusterColumns+` FROM clusters ORDER BY id`)
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Cluster, error) { return scanCluster(r) })
	if err != nil {
		return nil, translate("list clusters", err)
	}
	return cs, nil
}

// The cluster networks a cluster gets when CreateCluster is given none: the schema's defaults (kubeadm's).
const (
	DefaultServiceCIDR = "10.96.0.0/12"
	DefaultPodCIDR     = "10.244.0.0/16"
)

// Bounds on the prefix lengths of cluster networks.
const (
	minCIDRBits        = 8
	maxServiceCIDRBits = 28 // 16 addresses: the kubernetes Service, DNS and a few more
	maxPodCIDRBits     = 24 // one node's worth of pods
)

// parseClusterCIDR parses an IPv4 network in canonical form ("10.96.0.0/12": no host bits set) whose prefix
// length is between minCIDRBits and maxBits; "" is def.
func parseClusterCIDR(what, cidr, def string, maxBits int) (netip.Prefix, error) {
	if cidr == "" {
		cidr = def
	}
	p, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil || !p.Addr().Is4():
		return netip.Prefix{}, fmt.Errorf("tenancy: %s CIDR %q is not an IPv4 network: %w", what, cidr, ErrInvalid)
	case p.Masked() != p:
		return netip.Prefix{}, fmt.Errorf("tenancy: %s CIDR %q has host bits set (did you mean %s?): %w", what, cidr, p.Masked(), ErrInvalid)
	case p.Bits() < minCIDRBits || p.Bits() > maxBits:
		return netip.Prefix{}, fmt.Errorf("tenancy: %s CIDR %q must have a prefix length between /%d and /%d: %w",
			what, cidr, minCIDRBits, maxBits, ErrInvalid)
	}
	return p, nil
}

// CreateCluster creates cluster id, named name, in team teamID. The id must be a DNS label (ValidID) that no
// cluster has or ever had (ErrConflict: ids of deleted clusters are tombstoned, never reused); name "" is the id, and no other cluster of the team may have the name
// (ErrConflict). serviceCIDR and podCIDR are IPv4 networks in canonical form, /8 to /28 and /8 to /24, that do
// not overlap; "" takes DefaultServiceCIDR and DefaultPodCIDR. A bad id, name or network is ErrInvalid, an
// unknown team ErrNotFound.
func (s *Store) CreateCluster(ctx context.Context, teamID, id, name, serviceCIDR, podCIDR string) (Cluster, error) {
	if !ValidID(id) {
		return Cluster{}, fmt.Errorf("tenancy: cluster id %q is not a DNS label: %w", id, ErrInvalid)
	}
	if name == "" {
		name = id
	}
	if err := checkName("cluster", name); err != nil {
		return Cluster{}, err
	}
	svc, err := parseClusterCIDR("service", serviceCIDR, DefaultServiceCIDR, maxServiceCIDRBits)
	if err != nil {
		return Cluster{}, err
	}
	pod, err := parseClusterCIDR("pod", podCIDR, DefaultPodCIDR, maxPodCIDRBits)
	if err != nil {
		return Cluster{}, err
	}
	if svc.Overlaps(pod) {
		return Cluster{}, fmt.Errorf("tenancy: service CIDR %s and pod CIDR %s overlap: %w", svc, pod, ErrInvalid)
	}
	if !ValidID(teamID) {
		return Cluster{}, fmt.Errorf("tenancy: team %q: %w", teamID, ErrNotFound)
	}
	c, err := scanCluster(s.pool.QueryRow(ctx, `INSERT INTO clusters (id, team_id, name, service_cidr, pod_cidr, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+clusterColumns, id, teamID, name, svc, pod, s.now()))
	switch {
	case pgCode(err) == codeUnique && pgConstraint(err) == "clusters_pkey":
		return Cluster{}, fmt.Errorf("tenancy: cluster id %q is taken: %w", id, ErrConflict)
	case pgCode(err) == codeUnique && pgConstraint(err) == "cluster_tombstones_pkey":
		s.forgetCluster(id) // deleted by another process: not to be served from this cache any more
		return Cluster{}, fmt.Errorf("tenancy: cluster id %q was used by a deleted cluster and cannot be used again: %w", id, ErrConflict)
	case pgCode(err) == codeUnique:
		return Cluster{}, fmt.Errorf("tenancy: team %q has a cluster named %q: %w", teamID, name, ErrConflict)
	case pgCode(err) == codeForeignKey:
		return Cluster{}, fmt.Errorf("tenancy: team %q: %w", teamID, ErrNotFound)
	case err != nil:
		return Cluster{}, translate("create cluster", err)
	}
	s.forgetCluster(id) // a cluster of that id deleted by another process may still be cached
	return c, nil
}

// ClustersOf lists the clusters of team teamID by id, from the database; ErrNotFound for an unknown team.
func (s *Store) ClustersOf(ctx context.Context, teamID string) ([]Cluster, error) {
	if !ValidID(teamID) {
		return nil, fmt.Errorf("tenancy: team %q: %w", teamID, ErrNotFound)
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+clusterColumns+` FROM clusters WHERE team_id = $1 ORDER BY id COLLATE "C"`, teamID)
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Cluster, error) { return scanCluster(r) })
	if err == nil && len(cs) == 0 {
		err = s.mustExist(ctx, "teams", "team", teamID)
	}
	if err != nil {
		return nil, translate("list clusters", err)
	}
	return cs, nil
}

// DeleteCluster deletes cluster id and its join tokens, tombstones its id (never to be used again), and drops
// it from this Store's cluster cache; every process learns of the deletion from the access event log
// (FollowAccessEvents; until then others may serve it from their cache for up to Config.CacheTTL). Its objects in the object store are the
// caller's to remove. ErrNotFound when there is no such cluster.
func (s *Store) DeleteCluster(ctx context.Context, id string) error {
	if !ValidID(id) {
		return fmt.Errorf("tenancy: cluster %q: %w", id, ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM clusters WHERE id = $1", id)
	s.forgetCluster(id)
	if err != nil {
		return translate("delete cluster", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenancy: cluster %q: %w", id, ErrNotFound)
	}
	return nil
}
