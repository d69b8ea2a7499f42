package tenancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Access is a caller authenticated for one cluster: who they are and their role in the team that owns it.
type Access struct {
	Principal
	// Role is the caller's role in the cluster's team: RoleOwner, RoleAdmin, RoleMember or RoleViewer.
	Role string
	// Revision is the object store's revision (wh_meta) read in the same snapshot: every write committed before
	// the request started is at or below it, so an authorizer that waits for its RBAC state to reach it decides
	// on everything the caller could have written or read before (read with the token lookup, at no extra cost).
	Revision int64
}

// The team roles.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleViewer = "viewer"
)

// AuthenticateCluster authenticates bearer for a request to cluster in one query, without any cache: a
// revoked or expired token, a disabled user, a removed membership or a deleted cluster fails the very next
// request, on every server process. A bad token is ErrUnauthenticated (checked first, so a bad token never
// learns whether a cluster exists); a cluster that does not exist or whose team the caller is not a member of
// is ErrNotFound — the two are deliberately indistinguishable.
func (s *Store) AuthenticateCluster(ctx context.Context, bearer, cluster string) (*Access, error) {
	if !plausibleToken(bearer) {
		return nil, fmt.Errorf("tenancy: malformed token: %w", ErrUnauthenticated)
	}
	h := hashToken(bearer)
	now := s.now()
	var a Access
	var disabled bool
	var expires, revoked, lastUsed *time.Time
	var role *string
	err := s.pool.QueryRow(ctx, `SELECT t.id::text, t.user_id::text, u.email, u.disabled, t.expires_at, t.revoked_at,
			t.last_used_at,
			(SELECT m.role FROM clusters c JOIN memberships m ON m.team_id = c.team_id
				WHERE c.id = $2 AND m.user_id = t.user_id),
			(SELECT rev FROM wh_meta WHERE id = 1)
		FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1`, h[:], cluster).Scan(
		&a.TokenID, &a.UserID, &a.Email, &disabled, &expires, &revoked, &lastUsed, &role, &a.Revision)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("tenancy: unknown token: %w", ErrUnauthenticated)
	case err != nil:
		return nil, translate("authenticate", err)
	case revoked != nil:
		return nil, fmt.Errorf("tenancy: token %s revoked: %w", a.TokenID, ErrUnauthenticated)
	case expired(deref(expires), now):
		return nil, fmt.Errorf("tenancy: token %s expired: %w", a.TokenID, ErrUnauthenticated)
	case disabled:
		return nil, fmt.Errorf("tenancy: user %s disabled: %w", a.UserID, ErrUnauthenticated)
	}
	if lastUsed == nil || now.Sub(*lastUsed) >= lastUsedEvery {
		s.touch(ctx, a.TokenID, now)
	}
	if role == nil {
		return nil, fmt.Errorf("tenancy: cluster %q: %w", cluster, ErrNotFound)
	}
	a.Role = *role
	a.Admin = a.Role == RoleOwner || a.Role == RoleAdmin
	return &a, nil
}
