package tenancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Invitation to join a team; its token is returned once by CreateInvitation. It is pending until it is
// accepted, revoked or expires.
type Invitation struct {
	ID        string
	TeamID    string
	Email     string
	Role      string
	InvitedBy string // "" when created without an inviter or when the inviter was deleted
	CreatedAt time.Time
	ExpiresAt time.Time
	// AcceptedAt and RevokedAt are zero unless it was accepted or revoked.
	AcceptedAt time.Time
	RevokedAt  time.Time
}

const (
	// InvitationTokenPrefix starts an invitation token; the rest has the form of an API token's.
	InvitationTokenPrefix = "whi_"
	// DefaultInvitationTTL is how long an invitation stays valid unless CreateInvitation is told otherwise.
	DefaultInvitationTTL = 72 * time.Hour
	// MaxInvitationTTL bounds an invitation's life.
	MaxInvitationTTL = 30 * 24 * time.Hour
)

const invitationColumns = `id::text, team_id, email, role, coalesce(invited_by::text, ''), created_at, expires_at,
	accepted_at, revoked_at`

func scanInvitation(r pgx.Row) (Invitation, error) {
	var inv Invitation
	var accepted, revoked *time.Time
	err := r.Scan(&inv.ID, &inv.TeamID, &inv.Email, &inv.Role, &inv.InvitedBy, &inv.CreatedAt, &inv.ExpiresAt,
		&accepted, &revoked)
	inv.AcceptedAt, inv.RevokedAt = deref(accepted), deref(revoked)
	return inv, err
}

// pending reports whether inv may still be accepted at now.
func (inv Invitation) pending(now time.Time) bool {
	return inv.AcceptedAt.IsZero() && inv.RevokedAt.IsZero() && now.Before(inv.ExpiresAt)
}

// errNoInvitation is the one answer for an invitation token that is malformed, unknown, expired, revoked or
// accepted.
var errNoInvitation = fmt.Errorf("tenancy: invitation not found, expired, revoked or already accepted: %w", ErrNotFound)

// CreateInvitation invites email to team teamID with role (admin, member or viewer), valid for ttl (0:
// DefaultInvitationTTL; at most MaxInvitationTTL). invitedBy is the inviting user's id, or "". It returns the
// invitation token, which is not stored and cannot be shown again: "whi_" + 30 random base62 characters + a
// 6-character checksum, like an API token. A bad email, role, ttl or inviter is ErrInvalid; an unknown team
// ErrNotFound; an email that belongs to a member of the team, or that has a pending invitation to it,
// ErrConflict (revoke that one to send a new one).
func (s *Store) CreateInvitation(ctx context.Context, teamID, email, role, invitedBy string, ttl time.Duration) (string, Invitation, error) {
	email, err := checkEmail(email)
	if err != nil {
		return "", Invitation{}, err
	}
	if !assignableRole(role) {
		return "", Invitation{}, fmt.Errorf("tenancy: role %q: must be admin, member or viewer: %w", role, ErrInvalid)
	}
	if ttl == 0 {
		ttl = DefaultInvitationTTL
	}
	if ttl < 0 || ttl > MaxInvitationTTL {
		return "", Invitation{}, fmt.Errorf("tenancy: invitation lifetime %s must be positive and at most %s: %w",
			ttl, MaxInvitationTTL, ErrInvalid)
	}
	var inviter *string
	if invitedBy != "" {
		if !validUUID(invitedBy) {
			return "", Invitation{}, fmt.Errorf("tenancy: inviting user %q: %w", invitedBy, ErrInvalid)
		}
		inviter = &invitedBy
	}
	if !ValidID(teamID) {
		return "", Invitation{}, fmt.Errorf("tenancy: team %q: %w", teamID, ErrNotFound)
	}
	token := encodePrefixed(InvitationTokenPrefix, randomBase62(tokenRandLen))
	h := hashToken(token)
	now := s.now()
	var inv Invitation
	err = s.inTx(ctx, "create invitation", func(tx pgx.Tx) error {
		// Under the team lock, two invitations for one email cannot both pass the checks.
		if err := lockTeam(ctx, tx, teamID); err != nil {
			return err
		}
		member, err := exists(ctx, tx, `SELECT EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
			WHERE m.team_id = $1 AND u.email = $2)`, teamID, email)
		if err != nil {
			return err
		}
		if member {
			return fmt.Errorf("%s is already a member of team %q: %w", email, teamID, ErrConflict)
		}
		invited, err := exists(ctx, tx, `SELECT EXISTS (SELECT 1 FROM invitations WHERE team_id = $1 AND email = $2
			AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $3)`, teamID, email, now)
		if err != nil {
			return err
		}
		if invited {
			return fmt.Errorf("%s has a pending invitation to team %q: %w", email, teamID, ErrConflict)
		}
		inv, err = scanInvitation(tx.QueryRow(ctx, `INSERT INTO invitations
			(team_id, email, role, token_hash, invited_by, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+invitationColumns,
			teamID, email, role, h[:], inviter, now, now.Add(ttl)))
		if pgCode(err) == codeForeignKey {
			return fmt.Errorf("inviting user %q: %w", invitedBy, ErrInvalid)
		}
		return err
	})
	if err != nil {
		return "", Invitation{}, err
	}
	return token, inv, nil
}

// Invitations lists the invitations of team teamID, pending and past, newest first; ErrNotFound for an unknown
// team.
func (s *Store) Invitations(ctx context.Context, teamID string) ([]Invitation, error) {
	if !ValidID(teamID) {
		return nil, fmt.Errorf("tenancy: team %q: %w", teamID, ErrNotFound)
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+invitationColumns+` FROM invitations WHERE team_id = $1
		ORDER BY created_at DESC, id DESC`, teamID)
	invs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Invitation, error) { return scanInvitation(r) })
	if err == nil && len(invs) == 0 {
		err = s.mustExist(ctx, "teams", "team", teamID)
	}
	if err != nil {
		return nil, translate("list invitations", err)
	}
	return invs, nil
}

// RevokeInvitation revokes invitation id of team teamID, so its token no longer works. Revoking a revoked or
// expired invitation does nothing; an accepted one is ErrConflict (remove the member instead); an unknown one,
// or one of another team, ErrNotFound.
func (s *Store) RevokeInvitation(ctx context.Context, teamID, id string) error {
	if !ValidID(teamID) || !validUUID(id) {
		return fmt.Errorf("tenancy: invitation %q of team %q: %w", id, teamID, ErrNotFound)
	}
	var revoked, found bool
	err := s.pool.QueryRow(ctx, `WITH r AS (UPDATE invitations SET revoked_at = coalesce(revoked_at, $3)
			WHERE team_id = $1 AND id = $2 AND accepted_at IS NULL RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM r), EXISTS (SELECT 1 FROM invitations WHERE team_id = $1 AND id = $2)`,
		teamID, id, s.now()).Scan(&revoked, &found)
	switch {
	case err != nil:
		return translate("revoke invitation", err)
	case revoked:
		return nil
	case found:
		return fmt.Errorf("tenancy: invitation %q was accepted: %w", id, ErrConflict)
	}
	return fmt.Errorf("tenancy: invitation %q of team %q: %w", id, teamID, ErrNotFound)
}

// InvitationByToken returns the pending invitation token stands for, to show whom it invites where. A
// malformed, unknown, expired, revoked or accepted token is ErrNotFound, always the same answer.
func (s *Store) InvitationByToken(ctx context.Context, token string) (Invitation, error) {
	if !wellFormedPrefixed(InvitationTokenPrefix, token) {
		return Invitation{}, errNoInvitation
	}
	h := hashToken(token)
	inv, err := scanInvitation(s.pool.QueryRow(ctx, `SELECT `+invitationColumns+` FROM invitations
		WHERE token_hash = $1`, h[:]))
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !inv.pending(s.now()) {
		return Invitation{}, errNoInvitation
	}
	if err != nil {
		return Invitation{}, translate("invitation", err)
	}
	return inv, nil
}

// AcceptInvitation makes user userID a member of the invitation's team with its role, and marks the invitation
// accepted: it can be used once, even by concurrent calls. The token must be pending (ErrNotFound, as for
// InvitationByToken); the user must exist (ErrNotFound), have the invitation's email and not be disabled
// (ErrInvalid), and not be a member already (ErrConflict; the invitation stays pending).
func (s *Store) AcceptInvitation(ctx context.Context, token, userID string) (TeamMembership, error) {
	if !wellFormedPrefixed(InvitationTokenPrefix, token) {
		return TeamMembership{}, errNoInvitation
	}
	if !validUUID(userID) {
		return TeamMembership{}, fmt.Errorf("tenancy: user %q: %w", userID, ErrNotFound)
	}
	var m TeamMembership
	err := s.inTx(ctx, "accept invitation", func(tx pgx.Tx) error {
		inv, team, err := s.lockInvitation(ctx, tx, token)
		if err != nil {
			return err
		}
		var email string
		var disabled bool
		err = tx.QueryRow(ctx, "SELECT email, disabled FROM users WHERE id = $1 FOR KEY SHARE", userID).Scan(&email, &disabled)
		switch {
		case err != nil:
			return notFoundIfNoRows(err, fmt.Sprintf("user %q", userID))
		case email != inv.Email:
			return fmt.Errorf("the invitation is for another email than user %q's: %w", userID, ErrInvalid)
		case disabled:
			return fmt.Errorf("user %q is disabled: %w", userID, ErrInvalid)
		}
		if err := join(ctx, tx, inv, userID, s.now()); err != nil {
			return err
		}
		m = TeamMembership{Team: team, Role: inv.Role}
		return nil
	})
	if err != nil {
		return TeamMembership{}, err
	}
	s.forgetUser(userID)
	return m, nil
}

// AcceptInvitationNewUser creates a user with the invitation's email and password (MinPasswordLen to 1024
// bytes, required: ErrInvalid) and accepts the invitation for them, in one transaction. The token must be
// pending (ErrNotFound); a user with that email already existing is ErrConflict (they accept with
// AcceptInvitation instead).
func (s *Store) AcceptInvitationNewUser(ctx context.Context, token, password string) (User, TeamMembership, error) {
	if !wellFormedPrefixed(InvitationTokenPrefix, token) {
		return User{}, TeamMembership{}, errNoInvitation
	}
	if err := checkPassword(password); err != nil {
		return User{}, TeamMembership{}, err
	}
	// Check the token before the deliberately slow hash, so unknown tokens cost no CPU; the transaction checks
	// it again under its lock.
	if _, err := s.InvitationByToken(ctx, token); err != nil {
		return User{}, TeamMembership{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, TeamMembership{}, err
	}
	var u User
	var m TeamMembership
	err = s.inTx(ctx, "accept invitation", func(tx pgx.Tx) error {
		inv, team, err := s.lockInvitation(ctx, tx, token)
		if err != nil {
			return err
		}
		if u, err = s.insertUser(ctx, tx, inv.Email, &hash); err != nil {
			return err
		}
		if err := join(ctx, tx, inv, u.ID, s.now()); err != nil {
			return err
		}
		m = TeamMembership{Team: team, Role: inv.Role}
		return nil
	})
	if err != nil {
		return User{}, TeamMembership{}, err
	}
	return u, m, nil
}

// lockInvitation reads the pending invitation of token and its team, and locks the invitation so it is
// accepted once. Locks are taken in the order DeleteTeam takes them (team, then invitation), so the two
// cannot deadlock.
func (s *Store) lockInvitation(ctx context.Context, tx pgx.Tx, token string) (Invitation, Team, error) {
	h := hashToken(token)
	var teamID string
	if err := tx.QueryRow(ctx, "SELECT team_id FROM invitations WHERE token_hash = $1", h[:]).Scan(&teamID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Invitation{}, Team{}, errNoInvitation
		}
		return Invitation{}, Team{}, err
	}
	var t Team
	err := tx.QueryRow(ctx, "SELECT id, name, created_at FROM teams WHERE id = $1 FOR KEY SHARE", teamID).Scan(
		&t.ID, &t.Name, &t.CreatedAt)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Invitation{}, Team{}, errNoInvitation
		}
		return Invitation{}, Team{}, err
	}
	inv, err := scanInvitation(tx.QueryRow(ctx, `SELECT `+invitationColumns+` FROM invitations
		WHERE token_hash = $1 FOR UPDATE`, h[:]))
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !inv.pending(s.now()) {
		return Invitation{}, Team{}, errNoInvitation
	}
	return inv, t, err
}

// join adds user userID to the invitation's team and marks the invitation accepted by them.
func join(ctx context.Context, tx pgx.Tx, inv Invitation, userID string, now time.Time) error {
	tag, err := tx.Exec(ctx, `INSERT INTO memberships (team_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (team_id, user_id) DO NOTHING`, inv.TeamID, userID, inv.Role, now)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("user %q is already a member of team %q: %w", userID, inv.TeamID, ErrConflict)
	}
	_, err = tx.Exec(ctx, "UPDATE invitations SET accepted_at = $2, accepted_by = $3 WHERE id = $1", inv.ID, now, userID)
	return err
}
