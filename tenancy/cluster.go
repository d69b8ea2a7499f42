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
