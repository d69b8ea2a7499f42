package tenancy

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// TunnelHolder is the server replica holding a node agent's tunnel and the URL other replicas reach it at.
type TunnelHolder struct {
	Replica, URL string
}

// RecordTunnel records that replica (reachable at url) now holds the tunnel of node in cluster, replacing
// whichever replica held it before.
func (s *Store) RecordTunnel(ctx context.Context, cluster, node, replica, url string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO agent_tunnels (cluster_id, node_name, replica, peer_url, connected_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (cluster_id, node_name) DO UPDATE SET replica = $3, peer_url = $4, connected_at = $5`,
		cluster, node, replica, url, s.now())
	return translate("record tunnel", err)
}

// ForgetTunnel forgets the tunnel of node in cluster if replica still holds it (a newer connection to another
// replica is left alone).
func (s *Store) ForgetTunnel(ctx context.Context, cluster, node, replica string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM agent_tunnels WHERE cluster_id = $1 AND node_name = $2 AND replica = $3`,
		cluster, node, replica)
	return translate("forget tunnel", err)
}

// TunnelHolder returns the replica holding the tunnel of node in cluster; false when none does.
func (s *Store) TunnelHolder(ctx context.Context, cluster, node string) (TunnelHolder, bool, error) {
	var h TunnelHolder
	err := s.pool.QueryRow(ctx, `SELECT replica, peer_url FROM agent_tunnels WHERE cluster_id = $1 AND node_name = $2`,
		cluster, node).Scan(&h.Replica, &h.URL)
	if errors.Is(err, pgx.ErrNoRows) {
		return TunnelHolder{}, false, nil
	}
	if err != nil {
		return TunnelHolder{}, false, translate("tunnel holder", err)
	}
	return h, true, nil
}
