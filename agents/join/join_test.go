package join

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

const secret = "abcdefghijklmnopqrstuvwxyzABCDEF"

// joinServer is a server's join endpoints: /cacerts serves the server's own certificate, /join hands out a
// credential once per node name. answer overrides /join's status when set.
type joinServer struct {
	srv    *httptest.Server
	joins  atomic.Int32
	answer int
	ca     []byte
}

func newJoinServer(t *testing.T) *joinServer {
	js := &joinServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /platform/v1/cacerts", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(js.ca) })
	mux.HandleFunc("POST /platform/v1/join", func(w http.ResponseWriter, r *http.Request) {
		var b struct{ Token, NodeName string }
		_ = json.NewDecoder(r.Body).Decode(&b)
		if js.answer != 0 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(js.answer)
			_, _ = w.Write([]byte(`{"title":"Unauthorized","detail":"the join token is revoked"}`))
			return
		}
		js.joins.Add(1)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"credential": "whn_" + b.NodeName, "cluster": "c1",
			"nodeName": b.NodeName, "server": "https://" + r.Host + "/clusters/c1", "podCIDR": "10.244.0.0/16", "serviceCIDR": "10.96.0.0/12"})
	})
	js.srv = httptest.NewTLSServer(mux)
	t.Cleanup(js.srv.Close)
	js.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: js.srv.Certificate().Raw})
	return js
}

// token is a join token pinning the server's certificate.
func (js *joinServer) token() string {
	sum := sha256.Sum256(js.srv.Certificate().Raw)
	return "K10" + hex.EncodeToString(sum[:]) + "::abc123." + secret
}

func TestJoinKeepsTheIdentity(t *testing.T) {
	js := newJoinServer(t)
	dir := filepath.Join(t.TempDir(), "agent")
	cfg := Config{Server: js.srv.URL, Token: js.token(), NodeName: "n1", DataDir: dir}
	id, err := Join(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if id.Credential != "whn_n1" || id.Cluster != "c1" || id.APIServer != js.srv.URL+"/clusters/c1" || string(id.CA) != string(js.ca) ||
		id.PodCIDR != "10.244.0.0/16" || id.ServiceCIDR != "10.96.0.0/12" {
		t.Fatalf("identity %+v", id)
	}
	for _, f := range []string{credentialFile, caFile, nodeFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, st, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, nodeFile)); strings.Contains(string(b), "whn_") {
		t.Fatal("node.json holds the credential")
	}
	// The pinned CA is trusted by the client configuration built from the identity.
	tlsCfg, err := id.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	if resp, err := client.Get(js.srv.URL + "/platform/v1/cacerts"); err != nil {
		t.Fatalf("the pinned CA is not trusted: %v", err)
	} else {
		resp.Body.Close()
	}

	// A restart: no token needed, no second join.
	cfg.Token = ""
	again, err := Join(t.Context(), cfg)
	if err != nil || again.Credential != "whn_n1" || again.PodCIDR != "10.244.0.0/16" || js.joins.Load() != 1 {
		t.Fatalf("rejoin: %+v %v after %d joins", again, err, js.joins.Load())
	}
	// The data dir belongs to n1.
	cfg.NodeName = "n2"
	if _, err := Join(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "holds the identity of node n1") {
		t.Fatalf("another node name on the same data dir: %v", err)
	}
}

func TestJoinRefusals(t *testing.T) {
	js := newJoinServer(t)
	otherPin := sha256.Sum256([]byte("another CA"))
	otherToken := "K10" + hex.EncodeToString(otherPin[:]) + "::abc123." + secret
	for _, tc := range []struct {
		name    string
		cfg     func(dir string) Config
		answer  int
		wantErr error
		wantMsg string
	}{
		{name: "a CA other than the pinned one", cfg: func(dir string) Config {
			return Config{Server: js.srv.URL, Token: otherToken, NodeName: "n1", DataDir: dir}
		}, wantErr: ErrCAMismatch},
		{name: "plain http", cfg: func(dir string) Config {
			return Config{Server: "http://" + js.srv.Listener.Addr().String(), Token: js.token(), NodeName: "n1", DataDir: dir}
		}, wantMsg: "refusing the plain-http server URL"},
		{name: "no token and no identity", cfg: func(dir string) Config {
			return Config{Server: js.srv.URL, NodeName: "n1", DataDir: dir}
		}, wantErr: ErrNotJoined},
		{name: "malformed token", cfg: func(dir string) Config {
			return Config{Server: js.srv.URL, Token: "hello", NodeName: "n1", DataDir: dir}
		}, wantMsg: "the join token is malformed"},
		{name: "revoked token", cfg: func(dir string) Config {
			return Config{Server: js.srv.URL, Token: js.token(), NodeName: "n1", DataDir: dir}
		}, answer: http.StatusUnauthorized, wantErr: ErrRefused, wantMsg: "the join token is revoked"},
		{name: "name taken", cfg: func(dir string) Config {
			return Config{Server: js.srv.URL, Token: js.token(), NodeName: "n1", DataDir: dir}
		}, answer: http.StatusConflict, wantErr: ErrNameTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js.answer = tc.answer
			defer func() { js.answer = 0 }()
			dir := t.TempDir()
			_, err := Join(t.Context(), tc.cfg(dir))
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
			}
			if _, err := Load(dir); !errors.Is(err, ErrNotJoined) {
				t.Fatalf("a refused join left an identity: %v", err)
			}
		})
	}
}
