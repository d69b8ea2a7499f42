package tenancy

import (
	"crypto/rand"
	"crypto/sha256"
	"hash/crc32"
	"strings"
)

// Token format: TokenPrefix + tokenRandLen random base62 characters + tokenSumLen base62 characters of the
// CRC32 (IEEE) of everything before them, most significant digit first, zero-padded.
const (
	TokenPrefix  = "whp_"
	tokenRandLen = 30 // 30 × log2(62) ≈ 178.6 bits
	tokenSumLen  = 6  // 62^6 > 2^32
	// TokenLen is the length of a token minted by this package.
	TokenLen = len(TokenPrefix) + tokenRandLen + tokenSumLen
	// shownLen is how much of a minted token is kept as its prefix, shown to users to tell tokens apart.
	shownLen = len(TokenPrefix) + 4
)

// Bounds on any bearer token, minted or operator-provided (BootstrapConfig.Token).
const (
	MinTokenLen = 16
	maxTokenLen = 1024
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newToken mints a token from crypto/rand.
func newToken() string {
	return encodeToken(randomBase62(tokenRandLen))
}

// encodeToken builds a token from its random part (base62, tokenRandLen characters).
func encodeToken(random string) string { return encodePrefixed(TokenPrefix, random) }

// encodePrefixed builds a token of the minted format with another prefix (invitations use "whi_").
func encodePrefixed(prefix, random string) string {
	body := prefix + random
	return body + tokenChecksum(body)
}

// tokenChecksum is the base62 CRC32 of body, tokenSumLen characters.
func tokenChecksum(body string) string {
	n := crc32.ChecksumIEEE([]byte(body))
	var out [tokenSumLen]byte
	for i := tokenSumLen - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return string(out[:])
}

// wellFormedToken reports whether s has the shape of a minted token and a matching checksum.
func wellFormedToken(s string) bool { return wellFormedPrefixed(TokenPrefix, s) }

// wellFormedPrefixed reports whether s is prefix + tokenRandLen base62 characters + their checksum.
func wellFormedPrefixed(prefix, s string) bool {
	if len(s) != len(prefix)+tokenRandLen+tokenSumLen || !strings.HasPrefix(s, prefix) {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		if strings.IndexByte(base62, s[i]) < 0 {
			return false
		}
	}
	body := s[:len(s)-tokenSumLen]
	return tokenChecksum(body) == s[len(body):]
}

// plausibleToken reports whether s may be a token at all, deciding without the database: a length in bounds,
// and a valid checksum when it claims the minted format by its prefix.
func plausibleToken(s string) bool {
	if len(s) < MinTokenLen || len(s) > maxTokenLen {
		return false
	}
	return !strings.HasPrefix(s, TokenPrefix) || wellFormedToken(s)
}

// hashToken is what the database stores of a token.
func hashToken(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// shownPrefix is the part of a token kept in the clear; nothing for operator-provided tokens.
func shownPrefix(s string) string {
	if wellFormedToken(s) {
		return s[:shownLen]
	}
	return ""
}

// randomBase62 returns n uniformly random base62 characters from crypto/rand.
func randomBase62(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4)
	for len(out) < n {
		_, _ = rand.Read(buf) // never fails (crypto/rand)
		for _, b := range buf {
			if b < 248 && len(out) < n { // 248 = 4 × 62: reject the rest to keep the draw uniform
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out)
}
