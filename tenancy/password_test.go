package tenancy

import (
	"regexp"
	"strings"
	"testing"
)

var phc = regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

func TestHashPassword(t *testing.T) {
	h1, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := HashPassword("correct horse")
	if !phc.MatchString(h1) {
		t.Errorf("hash %q is not a PHC argon2id string with the current parameters", h1)
	}
	if h1 == h2 {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
	for _, tc := range []struct {
		password   string
		ok, rehash bool
	}{
		{"correct horse", true, false},
		{"correct horse ", false, false},
		{"Correct horse", false, false},
		{"", false, false},
		{strings.Repeat("x", maxPasswordLen+1), false, false},
	} {
		ok, rehash, err := VerifyPassword(h1, tc.password)
		if ok != tc.ok || rehash != tc.rehash || err != nil {
			t.Errorf("VerifyPassword(%.20q) = %v, %v, %v; want %v, %v", tc.password, ok, rehash, err, tc.ok, tc.rehash)
		}
	}
	for _, p := range []string{"", strings.Repeat("x", maxPasswordLen+1)} {
		_, err := HashPassword(p)
		wantErr(t, err, ErrInvalid)
	}
}

func TestVerifyOldParameters(t *testing.T) {
	salt := []byte("0123456789abcdef")
	for _, p := range []argonParams{{time: 1, memory: 8192, threads: 1}, {time: 3, memory: 65536, threads: 4}} {
		h := encodeHash(p, salt, "pw")
		ok, rehash, err := VerifyPassword(h, "pw")
		if !ok || !rehash || err != nil {
			t.Errorf("VerifyPassword(%q) = %v, %v, %v; want a match that needs rehashing", h, ok, rehash, err)
		}
	}
}

func TestVerifyRejectsOtherHashes(t *testing.T) {
	good := encodeHash(currentParams, []byte("0123456789abcdef"), "pw")
	parts := strings.Split(good, "$")
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "$")
	}
	for name, h := range map[string]string{
		"empty":             "",
		"bcrypt":            "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy",
		"argon2i":           with(1, "argon2i"),
		"version 16":        with(2, "v=16"),
		"params order":      with(3, "t=2,m=19456,p=1"),
		"params padded":     with(3, "m=019456,t=2,p=1"),
		"too many passes":   with(3, "m=19456,t=100,p=1"),
		"too much memory":   with(3, "m=4194304,t=2,p=1"),
		"no threads":        with(3, "m=19456,t=2,p=0"),
		"short salt":        with(4, "AAAA"),
		"salt not base64":   with(4, "!!!!!!!!!!!!!!!!!!!!!!"),
		"key not base64":    with(5, "%%%"),
		"extra field":       good + "$x",
		"no leading dollar": strings.TrimPrefix(good, "$"),
	} {
		t.Run(name, func(t *testing.T) {
			ok, _, err := VerifyPassword(h, "pw")
			if ok {
				t.Fatal("matched")
			}
			wantErr(t, err, ErrInvalid)
		})
	}
}

// FuzzVerifyPassword: no stored hash makes VerifyPassword panic or accept without the right parameters.
func FuzzVerifyPassword(f *testing.F) {
	f.Add(encodeHash(argonParams{time: 1, memory: 64, threads: 1}, []byte("01234567"), "pw"), "pw")
	f.Add("$argon2id$v=19$m=64,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "")
	f.Fuzz(func(t *testing.T, encoded, password string) {
		p, _, _, err := decodeHash(encoded)
		if err != nil {
			return
		}
		if p.time > maxTime || p.memory > maxMemory || p.threads > maxThreads || p.time == 0 || p.threads == 0 {
			t.Fatalf("decodeHash(%q) accepted parameters %+v", encoded, p)
		}
		if p.memory <= 1024 { // keep fuzzing fast: only verify cheap hashes
			_, _, _ = VerifyPassword(encoded, password)
		}
	})
}
