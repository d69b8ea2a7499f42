package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// AuditEvent is one audit record.
type AuditEvent struct {
	ID        int64 // assigned when written; ignored by Audit
	At        time.Time
	TeamID    string // "" for none (an event outside any team, such as a failed sign-in)
	ClusterID string // "" for none
	Actor     string // email or user name
	ActorID   string
	Action    string // required
	Resource  string
	Result    string
	Source    string // client address
	UserAgent string
	Detail    map[string]any // nil for none; numbers read back as float64
}

// AuditQuery selects audit records for AuditLog. Zero fields select everything.
type AuditQuery struct {
	TeamID    string // required
	ClusterID string
	Actor     string // matches AuditEvent.Actor or AuditEvent.ActorID
	Action    string
	Since     time.Time // At >= Since
	Until     time.Time // At < Until
	Limit     int       // 0: DefaultAuditLimit; more than MaxAuditLimit: MaxAuditLimit
	Before    int64     // id cursor: only ids below it (the ID of the last record of the previous page)
}

// Bounds of audit reads and records.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
	// maxAuditField bounds each text field of a record, in bytes; longer ones are cut.
	maxAuditField = 1024
	// maxAuditDetail bounds the JSON of a record's Detail, in bytes.
	maxAuditDetail = 64 << 10
	// pruneBatch is how many records PruneAudit deletes per statement, to keep each one short.
	pruneBatch = 10000
)

var auditColumns = []string{"at", "team_id", "cluster_id", "actor", "actor_id", "action", "resource", "result",
	"source", "user_agent", "detail"}

// Audit writes events in one batch. Each event is checked alone, so a bad event never costs another: an event
// without an Action, whose At is outside the years 1-9999, or whose Detail cannot be encoded as JSON or encodes
// to more than 64 KiB, is not written, and the error (ErrInvalid) names each such event by its index; the
// others are written all the same. An event's At zero is now; its ID is ignored. Text fields are made storable
// rather than refused: invalid UTF-8 is replaced, NUL bytes dropped, and each field cut to 1024 bytes. Any
// other error (ErrUnavailable, ErrClosed, ErrInternal) means nothing was written.
func (s *Store) Audit(ctx context.Context, events ...AuditEvent) error {
	invalid, err := s.audit(ctx, events)
	if err != nil {
		return err
	}
	errs := make([]error, 0, len(invalid))
	for _, bad := range invalid {
		errs = append(errs, fmt.Errorf("tenancy: audit event %d %w", bad.index, bad.err))
	}
	return errors.Join(errs...)
}

// invalidAuditEvent is an event Audit refused: its index in the batch and why.
type invalidAuditEvent struct {
	index int
	err   error
}

// audit writes the valid events and returns the invalid ones; err is a failed write (nothing written).
func (s *Store) audit(ctx context.Context, events []AuditEvent) (invalid []invalidAuditEvent, err error) {
	if len(events) == 0 {
		return nil, nil
	}
	now := s.now()
	rows := make([][]any, 0, len(events))
	for i, e := range events {
		row, err := auditRow(e, now)
		if err != nil {
			invalid = append(invalid, invalidAuditEvent{index: i, err: err})
			continue
		}
		rows = append(rows, row)
	}
	if len(rows) > 0 {
		if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{"audit_log"}, auditColumns, pgx.CopyFromRows(rows)); err != nil {
			return nil, translate("audit", err)
		}
	}
	return invalid, nil
}

// auditRow is e as a row of auditColumns, or an error (ErrInvalid, phrased to follow "audit event <i>") when e
// cannot be stored.
func auditRow(e AuditEvent, now time.Time) ([]any, error) {
	action := cleanText(e.Action)
	if action == "" {
		return nil, fmt.Errorf("has no action: %w", ErrInvalid)
	}
	at := e.At
	if at.IsZero() {
		at = now
	}
	if y := at.Year(); y < 1 || y > 9999 {
		return nil, fmt.Errorf("(%s) is dated in the year %d: %w", action, y, ErrInvalid)
	}
	detail, err := encodeDetail(e.Detail)
	if err != nil {
		return nil, fmt.Errorf("(%s): %w", action, err)
	}
	return []any{at, optText(e.TeamID), optText(e.ClusterID), cleanText(e.Actor), cleanText(e.ActorID), action,
		cleanText(e.Resource), cleanText(e.Result), cleanText(e.Source), cleanText(e.UserAgent), detail}, nil
}

// cleanText makes s storable as text: valid UTF-8, no NUL, at most maxAuditField bytes (cut at a character).
func cleanText(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxAuditField {
		cut := maxAuditField
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// optText is cleanText(s), or NULL for "".
func optText(s string) any {
	if s = cleanText(s); s == "" {
		return nil
	}
	return s
}

// encodeDetail is the JSON of detail for a jsonb column (nil for an empty detail). jsonb refuses the escape
// \u0000, so NUL characters become U+FFFD.
func encodeDetail(detail map[string]any) (any, error) {
	if len(detail) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return nil, fmt.Errorf("detail is not JSON: %v: %w", err, ErrInvalid)
	}
	if len(b) > maxAuditDetail {
		return nil, fmt.Errorf("detail has %d bytes of JSON, more than %d: %w", len(b), maxAuditDetail, ErrInvalid)
	}
	return replaceNULEscapes(b), nil
}

// replaceNULEscapes rewrites every \u0000 escape of the JSON b as \ufffd, skipping other escapes whole (so the
// "\\u0000" of an escaped backslash is left alone).
func replaceNULEscapes(b []byte) []byte {
	for i := 0; i < len(b)-1; i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) && string(b[i+2:i+6]) == "0000" {
			copy(b[i+2:i+6], "fffd")
		}
		i++ // skip the escaped character; the hex digits of \uXXXX never contain a backslash
	}
	return b
}

// AuditLog reads the audit records of team q.TeamID (required, ErrInvalid without) that match q, newest first
// (by id, the order they were written in). A negative Limit or Before is ErrInvalid. To page, pass the ID of
// the last record of a page as the next query's Before.
func (s *Store) AuditLog(ctx context.Context, q AuditQuery) ([]AuditEvent, error) {
	switch {
	case q.TeamID == "":
		return nil, fmt.Errorf("tenancy: audit query without a team: %w", ErrInvalid)
	case !ValidID(q.TeamID):
		return nil, fmt.Errorf("tenancy: audit query: team %q is not a team id: %w", q.TeamID, ErrInvalid)
	case q.Limit < 0:
		return nil, fmt.Errorf("tenancy: audit query limit %d is negative: %w", q.Limit, ErrInvalid)
	case q.Before < 0:
		return nil, fmt.Errorf("tenancy: audit query cursor %d is negative: %w", q.Before, ErrInvalid)
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultAuditLimit
	}
	limit = min(limit, MaxAuditLimit)
	var sql strings.Builder
	args := []any{q.TeamID}
	sql.WriteString(`SELECT id, at, coalesce(team_id, ''), coalesce(cluster_id, ''), actor, actor_id, action, resource,
		result, source, user_agent, detail FROM audit_log WHERE team_id = $1`)
	where := func(cond string, arg any) {
		args = append(args, arg)
		sql.WriteString(" AND " + strings.ReplaceAll(cond, "$", "$"+strconv.Itoa(len(args))))
	}
	if q.ClusterID != "" {
		where("cluster_id = $", q.ClusterID)
	}
	if q.Actor != "" {
		where("(actor = $ OR actor_id = $)", q.Actor)
	}
	if q.Action != "" {
		where("action = $", q.Action)
	}
	if !q.Since.IsZero() {
		where("at >= $", q.Since)
	}
	if !q.Until.IsZero() {
		where("at < $", q.Until)
	}
	if q.Before > 0 {
		where("id < $", q.Before)
	}
	args = append(args, limit)
	sql.WriteString(" ORDER BY id DESC LIMIT $" + strconv.Itoa(len(args)))
	rows, _ := s.pool.Query(ctx, sql.String(), args...)
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEvent, error) {
		var e AuditEvent
		var detail []byte
		err := r.Scan(&e.ID, &e.At, &e.TeamID, &e.ClusterID, &e.Actor, &e.ActorID, &e.Action, &e.Resource,
			&e.Result, &e.Source, &e.UserAgent, &detail)
		if err == nil && detail != nil {
			if jerr := json.Unmarshal(detail, &e.Detail); jerr != nil {
				return e, fmt.Errorf("audit record %d: detail: %v: %w", e.ID, jerr, ErrInternal)
			}
		}
		return e, err
	})
	if err != nil {
		return nil, translate("audit log", err)
	}
	return events, nil
}

// PruneAudit deletes the audit records written before before (by their At), in batches, and returns how many
// it deleted.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM audit_log WHERE id IN
			(SELECT id FROM audit_log WHERE at < $1 LIMIT $2)`, before, pruneBatch)
		if err != nil {
			return total, translate("prune audit log", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			return total, nil
		}
	}
}
