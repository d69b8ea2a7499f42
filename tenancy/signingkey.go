package tenancy

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SigningKey returns the key that signs cluster's ServiceAccount tokens (ECDSA P-256), creating it on first
// use. Replicas that ask at the same time agree on one key (insert-if-absent, then read). An unknown cluster is
// ErrNotFound.
func (s *Store) SigningKey(ctx context.Context, cluster string) (crypto.Signer, error) {
	if !ValidID(cluster) {
		return nil, fmt.Errorf("tenancy: cluster %q: %w", cluster, ErrNotFound)
	}
	var keyPEM string
	err := s.pool.QueryRow(ctx, `SELECT private_key FROM cluster_signing_keys WHERE cluster_id = $1`, cluster).Scan(&keyPEM)
	if errors.Is(err, pgx.ErrNoRows) {
		fresh, gerr := newSigningKeyPEM()
		if gerr != nil {
			return nil, gerr
		}
		_, err = s.pool.Exec(ctx, `INSERT INTO cluster_signing_keys (cluster_id, private_key) VALUES ($1, $2)
			ON CONFLICT (cluster_id) DO NOTHING`, cluster, fresh)
		if pgCode(err) == codeForeignKey {
			return nil, fmt.Errorf("tenancy: cluster %q: %w", cluster, ErrNotFound)
		}
		if err != nil {
			return nil, translate("create signing key", err)
		}
		err = s.pool.QueryRow(ctx, `SELECT private_key FROM cluster_signing_keys WHERE cluster_id = $1`, cluster).Scan(&keyPEM)
	}
	if err != nil {
		return nil, translate("signing key", err)
	}
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		return nil, fmt.Errorf("tenancy: signing key of cluster %s is not PEM: %w", cluster, ErrInternal)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tenancy: signing key of cluster %s: %v: %w", cluster, err, ErrInternal)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("tenancy: signing key of cluster %s cannot sign: %w", cluster, ErrInternal)
	}
	return signer, nil
}

func newSigningKeyPEM() (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("tenancy: generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("tenancy: encode signing key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}
