package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/servingcert"
)

func TestVersion(t *testing.T) {
	_, ts := newTestServer(t, Config{Store: &fakeStore{}})
	r := get(t, ts.URL+"/version")
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	want := map[string]string{"major": "1", "minor": "2", "gitVersion": "v1.2.3", "gitCommit": "abc123",
		"gitTreeState": "", "buildDate": "", "goVersion": "go1.26.8", "compiler": "gc", "platform": "linux/amd64"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/version (-want +got):\n%s", diff)
	}
}

func TestUnknownRoute(t *testing.T) {
	_, ts := newTestServer(t, Config{Store: &fakeStore{}})
	r := get(t, ts.URL+"/no/such/thing")
	wantStatus(t, r, http.StatusNotFound)
	p := decodeProblem(t, r)
	want := problem{Type: "about:blank", Title: "Not Found", Status: 404, Instance: "/no/such/thing",
		RequestID: r.header.Get(echo.HeaderXRequestID)}
	if diff := cmp.Diff(want, p, cmp.AllowUnexported(problem{})); diff != "" {
		t.Errorf("problem (-want +got):\n%s", diff)
	}

	head := do(t, http.MethodHead, ts.URL+"/no/such/thing", nil)
	wantStatus(t, head, http.StatusNotFound)

	post := do(t, http.MethodPost, ts.URL+"/livez", nil)
	wantStatus(t, post, http.StatusMethodNotAllowed)
	if allow := post.header.Get("Allow"); !strings.Contains(allow, http.MethodGet) {
		t.Errorf("Allow = %q, want GET in it", allow)
	}
}

func TestInternalErrorsAreNotShown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler echo.HandlerFunc
		logged  string
	}{
		{"error", func(echo.Context) error { return errors.New("pq: password authentication failed for secret") }, `"msg":"request failed"`},
		{"http error 500", func(echo.Context) error {
			return echo.NewHTTPError(http.StatusInternalServerError, "secret message").SetInternal(errors.New("secret cause"))
		}, `"msg":"request failed"`},
		{"http error 503", func(echo.Context) error {
			return echo.NewHTTPError(http.StatusServiceUnavailable, "secret message")
		}, `"msg":"request failed"`},
		{"panic", func(echo.Context) error { panic("secret panic value") }, `"msg":"panic serving request"`},
		{"panic error", func(echo.Context) error { panic(errors.New("secret panic error")) }, `"msg":"panic serving request"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logged := logTo(t)
			s, ts := newTestServer(t, Config{Store: &fakeStore{}, Logger: log})
			s.echo.GET("/boom", tc.handler)
			r := get(t, ts.URL+"/boom")
			if r.status < 500 {
				t.Fatalf("status = %d, want 5xx", r.status)
			}
			if strings.Contains(r.body, "secret") {
				t.Errorf("body leaks the error: %s", r.body)
			}
			p := decodeProblem(t, r)
			if p.Status != r.status || p.RequestID == "" || p.RequestID != r.header.Get(echo.HeaderXRequestID) {
				t.Errorf("problem = %+v, want status %d and the response's request ID", p, r.status)
			}
			// The details are in the log, under the request ID.
			wantContains(t, logged(), tc.logged, "secret", `"request_id":"`+p.RequestID+`"`)
			// The server survives.
			wantStatus(t, get(t, ts.URL+"/livez"), http.StatusOK)
		})
	}
}

func TestClientErrorMessageIsShown(t *testing.T) {
	s, ts := newTestServer(t, Config{Store: &fakeStore{}})
	s.echo.GET("/bad", func(echo.Context) error {
		return echo.NewHTTPError(http.StatusBadRequest, "name must not be empty")
	})
	r := get(t, ts.URL+"/bad")
	wantStatus(t, r, http.StatusBadRequest)
	if p := decodeProblem(t, r); p.Detail != "name must not be empty" || p.Title != "Bad Request" {
		t.Errorf("problem = %+v", p)
	}
}

func TestRequestID(t *testing.T) {
	log, logged := logTo(t)
	s, ts := newTestServer(t, Config{Store: &fakeStore{}, Logger: log})
	var seen string
	s.echo.GET("/id", func(c echo.Context) error {
		seen = RequestID(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	})
	for _, tc := range []struct {
		name, sent string
		kept       bool
	}{
		{"none", "", false},
		{"plain", "req-42.a_b", true},
		{"unsafe", "a b;<c>", false},
		{"too long", strings.Repeat("x", 129), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.sent != "" {
				h.Set(echo.HeaderXRequestID, tc.sent)
			}
			r := do(t, http.MethodGet, ts.URL+"/id", h)
			id := r.header.Get(echo.HeaderXRequestID)
			switch {
			case id == "" || id != seen:
				t.Errorf("response ID %q, handler saw %q: want the same non-empty ID", id, seen)
			case tc.kept && id != tc.sent:
				t.Errorf("ID = %q, want the client's %q", id, tc.sent)
			case !tc.kept && id == tc.sent:
				t.Errorf("client's ID %q was adopted", tc.sent)
			}
			wantContains(t, logged(), `"request_id":"`+id+`"`)
		})
	}
}

func TestStartServesUntilContextEnds(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listener: l, Store: &fakeStore{}, Version: testVersion, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	s.echo.GET("/slow", func(c echo.Context) error {
		close(entered)
		<-release
		return c.String(http.StatusOK, "done")
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	base := "http://" + l.Addr().String()
	wantStatus(t, get(t, base+"/livez"), http.StatusOK)

	slow := make(chan string, 1)
	go func() {
		res, err := http.Get(base + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		slow <- res.Status + " " + string(b)
	}()
	<-entered
	cancel() // shut down with a request in flight: it must complete
	close(release)
	if got := <-slow; got != "200 OK done" {
		t.Errorf("in-flight request: %q, want 200 OK done", got)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	if _, err := http.Get(base + "/livez"); err == nil {
		t.Error("server still accepts connections after Start returned")
	}
}

func TestStartForcesCloseAfterShutdownTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listener: l, Store: &fakeStore{}, Version: testVersion, Logger: discard,
		ShutdownTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	s.echo.GET("/stuck", func(c echo.Context) error {
		close(entered)
		<-release
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	go func() { _, _ = http.Get("http://" + l.Addr().String() + "/stuck") }()
	<-entered
	cancel()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not give up on a stuck request")
	}
}

func TestStartListenError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := New(Config{Listen: l.Addr().String(), Store: &fakeStore{}, Version: testVersion, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Start on a taken port = %v, want a listen error", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults", Config{Store: &fakeStore{}}, ""},
		{"no store", Config{}, "Store is required"},
		{"bad listen", Config{Store: &fakeStore{}, Listen: "8080"}, "want host:port"},
		{"negative timeout", Config{Store: &fakeStore{}, ReadyTimeout: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func decodeProblem(t *testing.T, r response) problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != problemContentType {
		t.Errorf("Content-Type = %q, want %s", ct, problemContentType)
	}
	var p problem
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return p
}

// TestTLSOffersHTTP2: with TLS, clients that speak HTTP/2 (client-go, browsers) get it.
func TestTLSOffersHTTP2(t *testing.T) {
	cert, caPEM, err := servingcert.Ensure(t.TempDir(), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Listener: l, Store: &fakeStore{}, Version: testVersion, Logger: discard,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() { cancel(); <-done }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	// The listener exists before Start: the connection waits in its queue until the server serves it.
	res, err := client.Get("https://" + l.Addr().String() + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", res.Proto)
	}
}

// Requests are logged as k3s logs them: failures and slow requests at info or error, the rest (heartbeats,
// lists, probes) at debug; streams are never slow.
func TestRequestLevel(t *testing.T) {
	for _, c := range []struct {
		status    int
		elapsed   time.Duration
		neverSlow bool
		want      slog.Level
	}{
		{200, time.Millisecond, false, slog.LevelDebug},
		{201, SlowRequest - 1, false, slog.LevelDebug},
		{200, SlowRequest, false, slog.LevelInfo},
		{200, time.Hour, true, slog.LevelDebug},
		{404, time.Millisecond, false, slog.LevelInfo},
		{401, time.Millisecond, true, slog.LevelInfo},
		{503, time.Millisecond, true, slog.LevelError},
	} {
		if got := requestLevel(c.status, c.elapsed, c.neverSlow); got != c.want {
			t.Errorf("requestLevel(%d, %v, %v) = %v, want %v", c.status, c.elapsed, c.neverSlow, got, c.want)
		}
	}
	for _, c := range []struct {
		target, upgrade string
		want            bool
	}{
		{"/clusters/c/api/v1/pods?watch=true", "", true},
		{"/clusters/c/api/v1/pods?watch=1", "", true},
		{"/clusters/c/api/v1/namespaces/d/pods/p/log?follow=true", "", true},
		{"/clusters/c/api/v1/namespaces/d/pods/p/exec", "SPDY/3.1", true},
		{"/clusters/c/api/v1/pods", "", false},
		{"/clusters/c/api/v1/pods?watch=false", "", false},
	} {
		r := httptest.NewRequest(http.MethodGet, c.target, nil)
		if c.upgrade != "" {
			r.Header.Set("Upgrade", c.upgrade)
		}
		if got := streaming(r); got != c.want {
			t.Errorf("streaming(%s, Upgrade %q) = %v, want %v", c.target, c.upgrade, got, c.want)
		}
	}
}
