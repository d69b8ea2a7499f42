package tenancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/validation"
)

// NodeCredentialPrefix starts every node credential ("whn_" + random + checksum, like API tokens).
const NodeCredentialPrefix = "whn_"

// NodeCredential describes a node's credential; its secret is returned once, by JoinNode.
type NodeCredential struct {
	ID, ClusterID, NodeName, JoinTokenID string
	CreatedAt, LastUsedAt, RevokedAt     time.Time
}

// JoinNode exchanges a join token for a credential of node nodeName in the token's cluster (counting one use
// of the token). The join token is checked first (secret, revocation, expiry, uses: a bad one is
// ErrUnauthenticated whatever the node name), so a caller without a valid token learns nothing of the
// cluster's nodes. A node name already joined (with a live credential) is then ErrConflict, and the use is not
// counted: revoke its credential first to re-join it, so a leaked join token cannot take over an existing node.
// A node name that is not a DNS subdomain is ErrInvalid (before anything is looked up).
func (s *Store) JoinNode(ctx context.Context, joinToken, nodeName string) (string, NodeCredential, error) {
	if errs := validation.IsDNS1123Subdomain(nodeName); len(errs) > 0 {
		return "", NodeCredential{}, fmt.Errorf("tenancy: node name %q: %s: %w", nodeName, errs[0], ErrInvalid)
	}
	var secret string
	var nc NodeCredential
	err := s.inTx(ctx, "join node", func(tx pgx.Tx) error {
		// The use is spent in the transaction: a conflict below rolls it back.
		jt, err := s.useJoinToken(ctx, tx, joinToken)
		if err != nil {
			return err
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM node_credentials WHERE cluster_id = $1
			AND node_name = $2 AND revoked_at IS NULL)`, jt.ClusterID, nodeName).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("node %q already joined cluster %s: %w", nodeName, jt.ClusterID, ErrConflict)
		}
		secret = encodePrefixed(NodeCredentialPrefix, randomBase62(tokenRandLen))
		h := hashToken(secret)
		nc = NodeCredential{ClusterID: jt.ClusterID, NodeName: nodeName, JoinTokenID: jt.ID, CreatedAt: s.now()}
		err = tx.QueryRow(ctx, `INSERT INTO node_credentials (cluster_id, node_name, hash, join_token_id, created_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id::text`, nc.ClusterID, nodeName, h[:], jt.ID, nc.CreatedAt).Scan(&nc.ID)
		if pgCode(err) == codeUnique {
			return fmt.Errorf("node %q already joined cluster %s: %w", nodeName, nc.ClusterID, ErrConflict)
		}
		return err
	})
	if err != nil {
		return "", NodeCredential{}, err
	}
	return secret, nc, nil
}

// AuthenticateNode checks a node credential for a request to cluster and returns the node's name and the
// object store's revision (see Access.Revision), fresh from the database (a revoked credential fails the next
// request). A malformed, unknown or revoked credential is ErrUnauthenticated; one of another cluster is
// ErrNotFound (the cluster does not exist for it).
func (s *Store) AuthenticateNode(ctx context.Context, credential, cluster string) (string, int64, error) {
	if !wellFormedPrefixed(NodeCredentialPrefix, credential) {
		return "", 0, fmt.Errorf("tenancy: malformed node credential: %w", ErrUnauthenticated)
	}
	h := hashToken(credential)
	var id, owner, node string
	var rev int64
	var revoked, used *time.Time
	err := s.pool.QueryRow(ctx, `SELECT id::text, cluster_id, node_name, revoked_at, last_used_at,
		(SELECT rev FROM wh_meta WHERE id = 1) FROM node_credentials WHERE hash = $1`, h[:]).Scan(
		&id, &owner, &node, &revoked, &used, &rev)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", 0, fmt.Errorf("tenancy: unknown node credential: %w", ErrUnauthenticated)
	case err != nil:
		return "", 0, translate("authenticate node", err)
	case revoked != nil:
		return "", 0, fmt.Errorf("tenancy: node credential of %s revoked: %w", node, ErrUnauthenticated)
	case owner != cluster:
		return "", 0, fmt.Errorf("tenancy: cluster %q: %w", cluster, ErrNotFound)
	}
	now := s.now()
	if used == nil || now.Sub(*used) >= lastUsedEvery {
		if _, err := s.pool.Exec(ctx, `UPDATE node_credentials SET last_used_at = $2 WHERE id = $1`, id, now); err != nil {
			s.log.Warn("recording node credential use failed", "node", node, "err", translate("touch node credential", err))
		}
	}
	return node, rev, nil
}

// NodeCredentials lists a cluster's node credentials, live and revoked, by node name.
func (s *Store) NodeCredentials(ctx context.Context, cluster string) ([]NodeCredential, error) {
	if !ValidID(cluster) {
		return nil, fmt.Errorf("tenancy: cluster %q: %w", cluster, ErrNotFound)
	}
	rows, _ := s.pool.Query(ctx, `SELECT id::text, cluster_id, node_name, coalesce(join_token_id, ''), created_at,
		last_used_at, revoked_at FROM node_credentials WHERE cluster_id = $1 ORDER BY node_name, created_at`, cluster)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NodeCredential, error) {
		var nc NodeCredential
		var used, revoked *time.Time
		err := r.Scan(&nc.ID, &nc.ClusterID, &nc.NodeName, &nc.JoinTokenID, &nc.CreatedAt, &used, &revoked)
		nc.LastUsedAt, nc.RevokedAt = deref(used), deref(revoked)
		return nc, err
	})
	if err != nil {
		return nil, translate("node credentials", err)
	}
	if out == nil {
		out = []NodeCredential{}
	}
	return out, nil
}

// RevokeNodeCredential revokes the live credential of a node; the node's agent is refused from its next request
// and the name may join again. No live credential is ErrNotFound.
func (s *Store) RevokeNodeCredential(ctx context.Context, cluster, nodeName string) error {
	if !ValidID(cluster) || len(validation.IsDNS1123Subdomain(nodeName)) > 0 {
		// No credential has such a name (JoinNode refuses it); nor must it reach a query (a NUL byte).
		return fmt.Errorf("tenancy: node %q of cluster %q has no live credential: %w", nodeName, cluster, ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE node_credentials SET revoked_at = $3 WHERE cluster_id = $1 AND node_name = $2
		AND revoked_at IS NULL`, cluster, nodeName, s.now())
	if err != nil {
		return translate("revoke node credential", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenancy: node %q of cluster %s has no live credential: %w", nodeName, cluster, ErrNotFound)
	}
	return nil
}
