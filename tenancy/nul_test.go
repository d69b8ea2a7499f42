package tenancy

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnstorableText (issue 34 item 11): text PostgreSQL cannot hold is the caller's ErrInvalid (or, for a
// name that cannot exist, ErrNotFound), never ErrInternal, and the driver's message is not passed on.
func TestUnstorableText(t *testing.T) {
	for _, code := range []string{codeBadText, codeUntranslatable} {
		err := translate("audit log", &pgconn.PgError{Code: code, Message: `invalid byte sequence for encoding "UTF8": 0x00`})
		wantErr(t, err, ErrInvalid)
		if strings.Contains(err.Error(), "0x00") {
			t.Errorf("the driver's message leaks: %v", err)
		}
	}
	db := newTestDB(t)
	s := db.open(t, nil)
	res := bootstrap(t, s, BootstrapConfig{})
	ctx := t.Context()
	for _, name := range []string{"a\x00b", "a\xffb"} {
		_, _, err := s.CreateToken(ctx, res.AdminID, name, time.Time{})
		wantErr(t, err, ErrInvalid)
		wantErr(t, s.RevokeNodeCredential(ctx, DefaultCluster, name), ErrNotFound)
		_, err = s.AuditLog(ctx, AuditQuery{TeamID: DefaultTeam, Actor: name})
		wantErr(t, err, ErrInvalid)
	}
}
