package registrytest

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// TestRegistry pushes an image to a registry with auth and reads it back: by tag and digest with the right
// password, refused with a wrong one and anonymously, and refused over TLS to a client that does not trust the CA.
func TestRegistry(t *testing.T) {
	r := Start(t, Options{Users: map[string]string{"alice": "s3cret"}})
	img, err := WithFiller(empty.Image, 2, 4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	digest := r.Push(t, "test/filler:1", img)
	want, _ := img.Digest()
	if digest != want {
		t.Fatalf("pushed digest %v, want %v", digest, want)
	}
	get := func(ref string, auth authn.Authenticator, tr http.RoundTripper) error {
		t.Helper()
		n, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Get(n, remote.WithAuth(auth), remote.WithTransport(tr), remote.WithContext(t.Context()))
		return err
	}
	for _, ref := range []string{r.Ref("test/filler:1"), r.Ref("test/filler@" + digest.String())} {
		if err := get(ref, r.Authenticator("alice"), r.Transport()); err != nil {
			t.Errorf("get %s: %v", ref, err)
		}
	}
	var terr *transport.Error
	if err := get(r.Ref("test/filler:1"), &authn.Basic{Username: "alice", Password: "wrong"}, r.Transport()); !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong password: %v, want 401", err)
	}
	if err := get(r.Ref("test/filler:1"), authn.Anonymous, r.Transport()); !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous: %v, want 401", err)
	}
	if err := get(r.Ref("test/filler:1"), r.Authenticator("alice"), http.DefaultTransport); err == nil {
		t.Error("a client without the test CA was served")
	}
}
