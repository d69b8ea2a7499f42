package tenancy

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ClusterCA returns cluster's own CA (certificate and private key, PEM), storing fresh()'s on first use.
// Replicas that ask at the same time agree on one (insert-if-absent, then read). An unknown cluster is
// ErrNotFound; the CA goes when the cluster does.
func (s *Store) ClusterCA(ctx context.Context, cluster string, fresh func() (certPEM, keyPEM []byte, err error)) ([]byte, []byte, error) {
	if !ValidID(cluster) {
		return nil, nil, fmt.Errorf("tenancy: cluster %q: %w", cluster, ErrNotFound)
	}
	const read = `SELECT cert_pem, key_pem FROM cluster_cas WHERE cluster_id = $1`
	var cert, key string
	err := s.pool.QueryRow(ctx, read, cluster).Scan(&cert, &key)
	if errors.Is(err, pgx.ErrNoRows) {
		c, k, ferr := fresh()
		if ferr != nil {
			return nil, nil, fmt.Errorf("tenancy: create the CA of cluster %s: %w", cluster, ferr)
		}
		_, err = s.pool.Exec(ctx, `INSERT INTO cluster_cas (cluster_id, cert_pem, key_pem) VALUES ($1, $2, $3)
			ON CONFLICT (cluster_id) DO NOTHING`, cluster, string(c), string(k))
		if pgCode(err) == codeForeignKey {
			return nil, nil, fmt.Errorf("tenancy: cluster %q: %w", cluster, ErrNotFound)
		}
		if err != nil {
			return nil, nil, translate("create cluster CA", err)
		}
		err = s.pool.QueryRow(ctx, read, cluster).Scan(&cert, &key)
	}
	if err != nil {
		return nil, nil, translate("cluster CA", err)
	}
	return []byte(cert), []byte(key), nil
}
