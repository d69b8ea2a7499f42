package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/version"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var _ Store = (*store.Store)(nil)

// openStore opens a store on a fresh, migrated database and returns it with the database's URL.
func openStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	st, err := store.Open(t.Context(), store.Config{URL: url, Retention: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(st.Close)
	return st, url
}

var testVersion = version.Info{Major: "1", Minor: "2", GitVersion: "v1.2.3", GitCommit: "abc123",
	GoVersion: "go1.26.8", Compiler: "gc", Platform: "linux/amd64"}

// newTestServer serves a Server built from cfg (defaults for the test filled in) with httptest.
func newTestServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Version == (version.Info{}) {
		cfg.Version = testVersion
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url string, header http.Header) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

func get(t *testing.T, url string) response {
	t.Helper()
	return do(t, http.MethodGet, url, nil)
}

func wantStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %d, want %d; body:\n%s", r.status, want, r.body)
	}
}

func wantContains(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("missing %q in:\n%s", sub, s)
		}
	}
}

// fakeStore is a Store whose CurrentRevision returns rev and err, or blocks until its context ends when hang
// is set.
type fakeStore struct {
	rev  int64
	err  error
	hang bool
}

func (f *fakeStore) CurrentRevision(ctx context.Context) (int64, error) {
	if f.hang {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return f.rev, f.err
}

// lockedWriter is a log sink tests can read while the server writes to it.
type lockedWriter struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// logTo returns a JSON logger at debug level and a function returning everything logged so far.
func logTo(t *testing.T) (*slog.Logger, func() string) {
	t.Helper()
	w := &lockedWriter{}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), w.String
}

var discard = slog.New(slog.DiscardHandler)
