package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// continueToken is the opaque position of a paged list: its revision and the last key returned.
type continueToken struct {
	Version   int    `json:"v"`
	Revision  int64  `json:"rv"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"n"`
}

const continueVersion = 1

func encodeContinue(t continueToken) string {
	t.Version = continueVersion
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ContinueToken is the token that continues a list read at rev after the key (namespace, name): a cache that
// served the first page of a list from memory hands it out, and the store serves the following pages.
func ContinueToken(rev int64, namespace, name string) string {
	return encodeContinue(continueToken{Revision: rev, Namespace: namespace, Name: name})
}

// ParseContinue reads a continue token: the revision its list is read at and the last key returned. A bad token
// is ErrBadContinue.
func ParseContinue(s string) (rev int64, namespace, name string, err error) {
	t, err := decodeContinue(s)
	if err != nil {
		return 0, "", "", err
	}
	return t.Revision, t.Namespace, t.Name, nil
}

// decodeContinue parses a token; anything malformed is ErrBadContinue.
func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 4096 {
		return t, fmt.Errorf("continue token is not valid base64url: %w", ErrBadContinue)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("continue token is not valid JSON: %w", ErrBadContinue)
	}
	if !utf8.ValidString(t.Namespace+t.Name) || strings.IndexByte(t.Namespace+t.Name, 0) >= 0 {
		return t, fmt.Errorf("continue token holds an invalid key: %w", ErrBadContinue)
	}
	if t.Version != continueVersion || t.Revision <= 0 || t.Name == "" {
		return t, fmt.Errorf("continue token has version %d, revision %d, name %q: %w", t.Version, t.Revision, t.Name, ErrBadContinue)
	}
	return t, nil
}
