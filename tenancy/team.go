package tenancy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Team is a tenant.
type Team struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// TeamMembership is a team seen by one of its members.
type TeamMembership struct {
	Team
	Role string
}

// Member is one member of a team.
type Member struct {
	UserID    string
	Email     string
	Role      string
	CreatedAt time.Time // when they joined
}

// CreateTeam creates team id named name with user ownerID as its owner. An id that is not a DNS label
// (ValidID) or a bad name (1 to MaxNameLen bytes of UTF-8 without control characters, not blank) is
// ErrInvalid, a taken id ErrConflict, an unknown owner ErrNotFound and a disabled one ErrInvalid.
func (s *Store) CreateTeam(ctx context.Context, ownerID, id, name string) (Team, error) {
	if !ValidID(id) {
		return Team{}, fmt.Errorf("tenancy: team id %q is not a DNS label: %w", id, ErrInvalid)
	}
	if err := checkName("team", name); err != nil {
		return Team{}, err
	}
	if !validUUID(ownerID) {
		return Team{}, fmt.Errorf("tenancy: user %q: %w", ownerID, ErrNotFound)
	}
	var t Team
	err := s.inTx(ctx, "create team", func(tx pgx.Tx) error {
		var disabled bool
		err := tx.QueryRow(ctx, "SELECT disabled FROM users WHERE id = $1 FOR KEY SHARE", ownerID).Scan(&disabled)
		if err != nil {
			return notFoundIfNoRows(err, fmt.Sprintf("user %q", ownerID))
		}
		if disabled {
			return fmt.Errorf("user %q is disabled: %w", ownerID, ErrInvalid)
		}
		err = tx.QueryRow(ctx, `INSERT INTO teams (id, name, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO NOTHING RETURNING id, name, created_at`, id, name, s.now()).Scan(&t.ID, &t.Name, &t.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("team %q already exists: %w", id, ErrConflict)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO memberships (team_id, user_id, role, created_at) VALUES ($1, $2, 'owner', $3)`,
			id, ownerID, t.CreatedAt)
		return err
	})
	if err != nil {
		return Team{}, err
	}
	s.forgetUser(ownerID) // a re-created default team makes its owner Principal.Admin
	return t, nil
}

// Team returns team id; ErrNotFound when there is none.
func (s *Store) Team(ctx context.Context, id string) (Team, error) {
	if !ValidID(id) {
		return Team{}, fmt.Errorf("tenancy: team %q: %w", id, ErrNotFound)
	}
	var t Team
	err := s.pool.QueryRow(ctx, "SELECT id, name, created_at FROM teams WHERE id = $1", id).Scan(&t.ID, &t.Name, &t.CreatedAt)
	if err != nil {
		return Team{}, translate(fmt.Sprintf("team %q", id), err)
	}
	return t, nil
}

// TeamsOf lists the teams user userID is a member of, with their role, ordered by team id; none for an
// unknown user.
func (s *Store) TeamsOf(ctx context.Context, userID string) ([]TeamMembership, error) {
	if !validUUID(userID) {
		return []TeamMembership{}, nil
	}
	rows, _ := s.pool.Query(ctx, `SELECT t.id, t.name, t.created_at, m.role
		FROM memberships m JOIN teams t ON t.id = m.team_id WHERE m.user_id = $1 ORDER BY t.id COLLATE "C"`, userID)
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TeamMembership, error) {
		var m TeamMembership
		err := r.Scan(&m.ID, &m.Name, &m.CreatedAt, &m.Role)
		return m, err
	})
	if err != nil {
		return nil, translate("list teams", err)
	}
	return ms, nil
}

// RenameTeam changes the name of team id (see CreateTeam for what a name may be); ErrNotFound when there is no
// such team.
func (s *Store) RenameTeam(ctx context.Context, id, name string) error {
	if err := checkName("team", name); err != nil {
		return err
	}
	if !ValidID(id) {
		return fmt.Errorf("tenancy: team %q: %w", id, ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, "UPDATE teams SET name = $2 WHERE id = $1", id, name)
	if err != nil {
		return translate("rename team", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tenancy: team %q: %w", id, ErrNotFound)
	}
	return nil
}

// DeleteTeam deletes team id with its memberships, invitations and clusters (and their join tokens), and
// returns the ids of the deleted clusters, ordered, so the caller can remove their objects from the object
// store. ErrNotFound when there is no such team.
func (s *Store) DeleteTeam(ctx context.Context, id string) ([]string, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("tenancy: team %q: %w", id, ErrNotFound)
	}
	var clusterIDs []string
	err := s.inTx(ctx, "delete team", func(tx pgx.Tx) error {
		// FOR UPDATE conflicts with the key-share lock of inserts that reference the team, so no cluster can be
		// added between the list below and the delete.
		var one int
		if err := tx.QueryRow(ctx, "SELECT 1 FROM teams WHERE id = $1 FOR UPDATE", id).Scan(&one); err != nil {
			return notFoundIfNoRows(err, fmt.Sprintf("team %q", id))
		}
		rows, _ := tx.Query(ctx, `SELECT id FROM clusters WHERE team_id = $1 ORDER BY id COLLATE "C"`, id)
		var err error
		if clusterIDs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DELETE FROM teams WHERE id = $1", id)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, c := range clusterIDs {
		s.forgetCluster(c)
	}
	s.tokens.removeFunc(func([32]byte, cachedToken) bool { return true }) // Principal.Admin, if it was the default team
	return clusterIDs, nil
}

// lockTeam takes a FOR NO KEY UPDATE lock on team id's row, which serializes the membership changes of one team
// (the ownership rule is checked under it) without blocking inserts that merely reference the team.
func lockTeam(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM teams WHERE id = $1 FOR NO KEY UPDATE", id).Scan(&one)
	return notFoundIfNoRows(err, fmt.Sprintf("team %q", id))
}

// TransferOwnership makes user toUserID the owner of team teamID and the current owner an admin, atomically:
// the team has exactly one owner before and after. toUserID must already be a member and not disabled
// (ErrInvalid otherwise); transferring to the owner does nothing. An unknown team is ErrNotFound.
func (s *Store) TransferOwnership(ctx context.Context, teamID, toUserID string) error {
	if !ValidID(teamID) {
		return fmt.Errorf("tenancy: team %q: %w", teamID, ErrNotFound)
	}
	if !validUUID(toUserID) {
		return fmt.Errorf("tenancy: user %q is not a member of team %q: %w", toUserID, teamID, ErrInvalid)
	}
	var previous string
	err := s.inTx(ctx, "transfer ownership", func(tx pgx.Tx) error {
		if err := lockTeam(ctx, tx, teamID); err != nil {
			return err
		}
		var role string
		var disabled bool
		err := tx.QueryRow(ctx, `SELECT m.role, u.disabled FROM memberships m JOIN users u ON u.id = m.user_id
			WHERE m.team_id = $1 AND m.user_id = $2`, teamID, toUserID).Scan(&role, &disabled)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("user %q is not a member of team %q: %w", toUserID, teamID, ErrInvalid)
		case err != nil:
			return err
		case disabled:
			return fmt.Errorf("user %q is disabled: %w", toUserID, ErrInvalid)
		case role == RoleOwner:
			return nil
		}
		// Demote first: the unique index allows one owner at any moment, even inside the transaction.
		err = tx.QueryRow(ctx, `UPDATE memberships SET role = 'admin' WHERE team_id = $1 AND role = 'owner'
			RETURNING user_id::text`, teamID).Scan(&previous)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no owner at all (deleted user): just promote
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE memberships SET role = 'owner' WHERE team_id = $1 AND user_id = $2", teamID, toUserID)
		return err
	})
	if err != nil {
		return err
	}
	s.forgetUser(toUserID)
	if previous != "" {
		s.forgetUser(previous)
	}
	return nil
}

// Members lists the members of team teamID ordered by email; ErrNotFound for an unknown team.
func (s *Store) Members(ctx context.Context, teamID string) ([]Member, error) {
	if !ValidID(teamID) {
		return nil, fmt.Errorf("tenancy: team %q: %w", teamID, ErrNotFound)
	}
	rows, _ := s.pool.Query(ctx, `SELECT m.user_id::text, u.email, m.role, m.created_at
		FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.team_id = $1 ORDER BY u.email COLLATE "C"`, teamID)
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		err := r.Scan(&m.UserID, &m.Email, &m.Role, &m.CreatedAt)
		return m, err
	})
	if err == nil && len(ms) == 0 {
		err = s.mustExist(ctx, "teams", "team", teamID)
	}
	if err != nil {
		return nil, translate("list members", err)
	}
	return ms, nil
}

// mustExist is ErrNotFound when table has no row with that id; for lists, which are otherwise just empty.
func (s *Store) mustExist(ctx context.Context, table, what, id string) error {
	ok, err := exists(ctx, s.pool, "SELECT EXISTS (SELECT 1 FROM "+table+" WHERE id = $1)", id)
	if err == nil && !ok {
		err = fmt.Errorf("%s %q: %w", what, id, ErrNotFound)
	}
	return err
}

// MemberRole returns the role of user userID in team teamID; ErrNotFound when they are not a member (or either
// does not exist).
func (s *Store) MemberRole(ctx context.Context, teamID, userID string) (string, error) {
	if !ValidID(teamID) || !validUUID(userID) {
		return "", fmt.Errorf("tenancy: user %q in team %q: %w", userID, teamID, ErrNotFound)
	}
	var role string
	err := s.pool.QueryRow(ctx, "SELECT role FROM memberships WHERE team_id = $1 AND user_id = $2",
		teamID, userID).Scan(&role)
	if err != nil {
		return "", translate(fmt.Sprintf("user %q in team %q", userID, teamID), err)
	}
	return role, nil
}

// SetRole changes the role of member userID of team teamID to admin, member or viewer. Any other role,
// owner included (ownership moves only by TransferOwnership), is ErrInvalid; changing the owner's role is
// ErrConflict; a user who is not a member is ErrNotFound.
func (s *Store) SetRole(ctx context.Context, teamID, userID, role string) error {
	if !assignableRole(role) {
		return fmt.Errorf("tenancy: role %q: must be admin, member or viewer (ownership moves by transfer): %w", role, ErrInvalid)
	}
	return s.changeMember(ctx, "set role", teamID, userID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE memberships SET role = $3 WHERE team_id = $1 AND user_id = $2", teamID, userID, role)
		return err
	})
}

// RemoveMember removes user userID from team teamID. Removing the owner is ErrConflict (transfer ownership
// first, or delete the team); a user who is not a member is ErrNotFound.
func (s *Store) RemoveMember(ctx context.Context, teamID, userID string) error {
	return s.changeMember(ctx, "remove member", teamID, userID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM memberships WHERE team_id = $1 AND user_id = $2", teamID, userID)
		return err
	})
}

// changeMember runs change on a member who is not the owner, under the team lock.
func (s *Store) changeMember(ctx context.Context, op, teamID, userID string, change func(pgx.Tx) error) error {
	if !ValidID(teamID) || !validUUID(userID) {
		return fmt.Errorf("tenancy: user %q in team %q: %w", userID, teamID, ErrNotFound)
	}
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		if err := lockTeam(ctx, tx, teamID); err != nil {
			return err
		}
		var role string
		err := tx.QueryRow(ctx, "SELECT role FROM memberships WHERE team_id = $1 AND user_id = $2",
			teamID, userID).Scan(&role)
		if err != nil {
			return notFoundIfNoRows(err, fmt.Sprintf("user %q in team %q", userID, teamID))
		}
		if role == RoleOwner {
			return fmt.Errorf("user %q is the owner of team %q (transfer ownership first): %w", userID, teamID, ErrConflict)
		}
		return change(tx)
	})
	if err != nil {
		return err
	}
	s.forgetUser(userID)
	return nil
}
