package tenancy

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var randomPart = rapid.StringOfN(rapid.SampledFrom([]rune(base62)), tokenRandLen, tokenRandLen, -1)

// TestTokenChecksumProperties: every encoded token parses; every single-character change and every swap of two
// different adjacent characters is caught by the checksum (CRC32 detects all bursts up to 32 bits).
func TestTokenChecksumProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tok := encodeToken(randomPart.Draw(t, "random"))
		if len(tok) != TokenLen || !strings.HasPrefix(tok, TokenPrefix) || !wellFormedToken(tok) || !plausibleToken(tok) {
			t.Fatalf("encoded token %q does not parse", tok)
		}
		i := rapid.IntRange(0, TokenLen-1).Draw(t, "pos")
		c := rapid.Byte().Filter(func(c byte) bool { return c != tok[i] }).Draw(t, "char")
		changed := tok[:i] + string([]byte{c}) + tok[i+1:]
		if wellFormedToken(changed) || plausibleToken(changed) && strings.HasPrefix(changed, TokenPrefix) {
			t.Fatalf("%q with byte %d changed to %q still parses", tok, i, c)
		}
		j := rapid.IntRange(0, TokenLen-2).Draw(t, "swap")
		if tok[j] != tok[j+1] {
			swapped := tok[:j] + string([]byte{tok[j+1], tok[j]}) + tok[j+2:]
			if wellFormedToken(swapped) {
				t.Fatalf("%q with bytes %d and %d swapped still parses", tok, j, j+1)
			}
		}
	})
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := newToken()
		if !wellFormedToken(tok) || seen[tok] {
			t.Fatalf("newToken() = %q: malformed or repeated", tok)
		}
		seen[tok] = true
		if p := shownPrefix(tok); p != tok[:8] {
			t.Fatalf("shownPrefix(%q) = %q", tok, p)
		}
	}
	if p := shownPrefix("operator-chosen-token"); p != "" {
		t.Errorf("shownPrefix of a custom token = %q, want nothing", p)
	}
}

func TestPlausibleToken(t *testing.T) {
	for _, tc := range []struct {
		token string
		want  bool
	}{
		{newToken(), true},
		{strings.Repeat("x", MinTokenLen), true},
		{strings.Repeat("x", MinTokenLen-1), false},
		{strings.Repeat("x", maxTokenLen+1), false},
		{TokenPrefix + strings.Repeat("x", 40), false}, // claims the minted format, wrong length
		{"WHP_" + strings.Repeat("x", 36), true},       // prefixes are case-sensitive: a custom token
	} {
		if got := plausibleToken(tc.token); got != tc.want {
			t.Errorf("plausibleToken(%q) = %v, want %v", tc.token, got, tc.want)
		}
	}
}

func TestRandomBase62IsRoughlyUniform(t *testing.T) {
	counts := map[rune]int{}
	s := randomBase62(62 * 200)
	for _, c := range s {
		counts[c]++
	}
	for _, c := range base62 {
		if n := counts[c]; n < 100 || n > 330 { // expected 200; far outside binomial spread only if broken
			t.Errorf("character %q drawn %d times in %d, expected about 200", c, n, len(s))
		}
	}
}
