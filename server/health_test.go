package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestProbesWithStore(t *testing.T) {
	st, _ := openStore(t)
	_, ts := newTestServer(t, Config{Store: st})
	for _, tc := range []struct {
		path string
		want string
	}{
		{"/healthz", "ok"},
		{"/livez", "ok"},
		{"/readyz", "ok"},
		{"/readyz/store", "ok"},
		{"/livez?verbose", "[+]ping ok\nlivez check passed\n"},
		{"/readyz?verbose", "[+]ping ok\n[+]store ok\nreadyz check passed\n"},
		{"/readyz?verbose&exclude=store", "[+]ping ok\nreadyz check passed\n"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := get(t, ts.URL+tc.path)
			wantStatus(t, r, http.StatusOK)
			if r.body != tc.want {
				t.Errorf("body = %q, want %q", r.body, tc.want)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type = %q, want text/plain", ct)
			}
		})
	}
}

func TestReadyzFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store *fakeStore
	}{
		{"error", &fakeStore{err: errors.New("store: current revision: secret detail")}},
		{"timeout", &fakeStore{hang: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logged := logTo(t)
			_, ts := newTestServer(t, Config{Store: tc.store, ReadyTimeout: 50 * time.Millisecond, Logger: log})
			for _, path := range []string{"/readyz", "/readyz?verbose", "/readyz/store"} {
				r := get(t, ts.URL+path)
				wantStatus(t, r, http.StatusServiceUnavailable)
				wantContains(t, r.body, "[-]store failed: reason withheld\n", "readyz check failed\n")
				if strings.Contains(r.body, "secret") || strings.Contains(r.body, "deadline") {
					t.Errorf("body leaks the cause:\n%s", r.body)
				}
			}
			wantContains(t, logged(), `"msg":"health check failed"`, `"check":"store"`)
			// Liveness does not depend on the store.
			wantStatus(t, get(t, ts.URL+"/livez"), http.StatusOK)
			wantStatus(t, get(t, ts.URL+"/healthz"), http.StatusOK)
			wantStatus(t, get(t, ts.URL+"/readyz?exclude=store"), http.StatusOK)
		})
	}
}

func TestReadyzStoreClosed(t *testing.T) {
	st, _ := openStore(t)
	_, ts := newTestServer(t, Config{Store: st})
	wantStatus(t, get(t, ts.URL+"/readyz"), http.StatusOK)
	st.Close()
	r := get(t, ts.URL+"/readyz?verbose")
	wantStatus(t, r, http.StatusServiceUnavailable)
	wantContains(t, r.body, "[+]ping ok\n[-]store failed: reason withheld\n")
	wantStatus(t, get(t, ts.URL+"/livez"), http.StatusOK)
}

func TestReadyzDatabaseGone(t *testing.T) {
	st, dbURL := openStore(t)
	_, ts := newTestServer(t, Config{Store: st, ReadyTimeout: time.Second})
	wantStatus(t, get(t, ts.URL+"/readyz"), http.StatusOK)
	dropDatabase(t, dbURL)
	wantStatus(t, get(t, ts.URL+"/readyz"), http.StatusServiceUnavailable)
	wantStatus(t, get(t, ts.URL+"/livez"), http.StatusOK)
}

// dropDatabase drops the database of dbURL, disconnecting its sessions, as an operator (or an outage) would.
func dropDatabase(t *testing.T, dbURL string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatalf("connect admin: %v", err)
	}
	defer conn.Close(context.Background())
	name := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		t.Fatalf("drop database: %v", err)
	}
}
