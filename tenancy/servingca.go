package tenancy

import (
	"context"
	"fmt"
)

// SharedCA returns the serving CA all replicas share (certificate and key, PEM). The first caller's candidate
// becomes it; later callers get the stored one whatever they offer, so replicas that start together agree.
func (s *Store) SharedCA(ctx context.Context, certPEM, keyPEM []byte) ([]byte, []byte, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, nil, fmt.Errorf("tenancy: shared CA: a certificate and a key are required: %w", ErrInvalid)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO serving_ca (id, cert_pem, key_pem) VALUES (1, $1, $2)
		ON CONFLICT (id) DO NOTHING`, string(certPEM), string(keyPEM)); err != nil {
		return nil, nil, translate("shared CA", err)
	}
	var cert, key string
	if err := s.pool.QueryRow(ctx, `SELECT cert_pem, key_pem FROM serving_ca WHERE id = 1`).Scan(&cert, &key); err != nil {
		return nil, nil, translate("shared CA", err)
	}
	return []byte(cert), []byte(key), nil
}
