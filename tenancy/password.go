package tenancy

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// argonParams are the tunable argon2id parameters of one hash.
type argonParams struct {
	time    uint32 // passes
	memory  uint32 // KiB
	threads uint8
}

// currentParams are what HashPassword uses: OWASP's argon2id baseline (t=2, 19 MiB, p=1).
var currentParams = argonParams{time: 2, memory: 19 * 1024, threads: 1}

const (
	saltLen = 16
	keyLen  = 32
	// maxPasswordLen bounds what is hashed; longer input is ErrInvalid rather than a slow hash.
	maxPasswordLen = 1024
)

// Bounds on parameters accepted from a stored hash, so a tampered row cannot make a verify take minutes.
const (
	maxTime    = 16
	maxMemory  = 1 << 20 // 1 GiB in KiB
	maxThreads = 16
)

// HashPassword hashes password with argon2id and the current parameters and a fresh random salt, returning a
// PHC string "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>" (unpadded standard base64). An empty or over-long
// password is ErrInvalid.
func HashPassword(password string) (string, error) {
	if password == "" || len(password) > maxPasswordLen {
		return "", fmt.Errorf("tenancy: password must have 1 to %d bytes: %w", maxPasswordLen, ErrInvalid)
	}
	salt := make([]byte, saltLen)
	_, _ = rand.Read(salt) // never fails (crypto/rand)
	return encodeHash(currentParams, salt, password), nil
}

func encodeHash(p argonParams, salt []byte, password string) string {
	key := argon2.IDKey([]byte(password), salt, p.time, p.memory, p.threads, keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.time, p.threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// VerifyPassword reports whether password matches encoded (compared in constant time), and whether encoded
// should be replaced by a fresh HashPassword because it uses other parameters than the current ones. A hash that
// is not argon2id version 19 in PHC form, or whose parameters are out of bounds, is ErrInvalid.
func VerifyPassword(encoded, password string) (ok, rehash bool, err error) {
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		return false, false, err
	}
	if len(password) > maxPasswordLen {
		return false, false, nil
	}
	got := argon2.IDKey([]byte(password), salt, p.time, p.memory, p.threads, uint32(len(key)))
	ok = subtle.ConstantTimeCompare(got, key) == 1
	rehash = p != currentParams || len(salt) != saltLen || len(key) != keyLen
	return ok, rehash, nil
}

func decodeHash(encoded string) (argonParams, []byte, []byte, error) {
	bad := func(why string) (argonParams, []byte, []byte, error) {
		return argonParams{}, nil, nil, fmt.Errorf("tenancy: password hash: %s: %w", why, ErrInvalid)
	}
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return bad("not an argon2id PHC string")
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return bad("unsupported version " + parts[2])
	}
	p, err := parseParams(parts[3])
	if err != nil {
		return bad(err.Error())
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 || len(salt) > 64 {
		return bad("bad salt")
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return bad("bad key")
	}
	return p, salt, key, nil
}

// parseParams parses "m=<KiB>,t=<passes>,p=<threads>" strictly (that order, decimal, in bounds).
func parseParams(s string) (argonParams, error) {
	fields := strings.Split(s, ",")
	if len(fields) != 3 {
		return argonParams{}, fmt.Errorf("parameters %q", s)
	}
	var v [3]uint64
	for i, name := range []string{"m=", "t=", "p="} {
		num, found := strings.CutPrefix(fields[i], name)
		n, err := strconv.ParseUint(num, 10, 32)
		if !found || err != nil || strconv.FormatUint(n, 10) != num {
			return argonParams{}, fmt.Errorf("parameters %q", s)
		}
		v[i] = n
	}
	m, t, p := v[0], v[1], v[2]
	if t < 1 || t > maxTime || p < 1 || p > maxThreads || m < 8*p || m > maxMemory {
		return argonParams{}, fmt.Errorf("parameters %q out of bounds", s)
	}
	return argonParams{time: uint32(t), memory: uint32(m), threads: uint8(p)}, nil
}
