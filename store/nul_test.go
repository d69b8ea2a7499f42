package store

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnstorableListNamespace (issue 34 item 11): a namespace PostgreSQL text cannot hold (NUL, invalid UTF-8)
// or over MaxKeyPart bytes is ErrInvalid for List, as for every keyed call, never ErrInternal; ValidKeyPart is
// the rule callers check names against first.
func TestUnstorableListNamespace(t *testing.T) {
	s := openTest(t)
	for name, ns := range map[string]string{
		"NUL":       "a\x00b",
		"bad UTF-8": "a\xffb",
		"too long":  strings.Repeat("a", MaxKeyPart+1),
	} {
		t.Run(name, func(t *testing.T) {
			if ValidKeyPart(ns) {
				t.Errorf("ValidKeyPart(%q) = true", ns)
			}
			_, err := s.List(t.Context(), ListOptions{Cluster: "c", Resource: "pods", Namespace: ns})
			wantErr(t, err, ErrInvalid)
		})
	}
	for _, ok := range []string{"", "default", "ünïcode", strings.Repeat("a", MaxKeyPart)} {
		if !ValidKeyPart(ok) {
			t.Errorf("ValidKeyPart(%q) = false", ok)
		}
	}
	if _, err := s.List(t.Context(), ListOptions{Cluster: "c", Resource: "pods", Namespace: "default"}); err != nil {
		t.Fatal(err)
	}
}

// TestTranslateUnstorableText: PostgreSQL's refusal of text it cannot hold is the caller's invalid argument,
// not an internal error (a backstop for strings that reach a query unchecked).
func TestTranslateUnstorableText(t *testing.T) {
	for _, code := range []string{"22021", "22P05"} {
		err := translate("get", key("c", "ns", "a"), &pgconn.PgError{Code: code,
			Message: `invalid byte sequence for encoding "UTF8": 0x00`})
		wantErr(t, err, ErrInvalid)
		if strings.Contains(err.Error(), "0x00") {
			t.Errorf("the driver's message leaks: %v", err)
		}
	}
	wantErr(t, translate("get", nil, &pgconn.PgError{Code: "XX000"}), ErrInternal)
}
