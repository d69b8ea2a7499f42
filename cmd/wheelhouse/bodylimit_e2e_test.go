package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestUnauthenticatedBodiesAreBounded sends what filled the disk of a live server (issue 34, item 6): a 300 MiB
// multipart upload, without credentials, to the dashboard's sign-in and invitation forms, and the same class of
// body to the platform API's public endpoints and the Kubernetes API. The server's TMPDIR is a directory of the
// test's: while each upload streams, it must stay empty (Go's multipart reader spools file parts over 32 MiB
// there), and each is refused with a readable answer long before it is sent.
func TestUnauthenticatedBodiesAreBounded(t *testing.T) {
	bin := buildBinary(t)
	tmp := t.TempDir()
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken, "TMPDIR=" + tmp}, "--data-dir", t.TempDir())
	p.waitReady(t)
	before := dirBytes(tmp)
	multipartType := "multipart/form-data; boundary=wheelhouse-e2e"
	for _, tc := range []struct {
		name, path, contentType string
		want                    int
		wantBody                string
	}{
		{"dashboard sign-in", "/ui/signin", multipartType, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"dashboard invitation", "/ui/invitation", multipartType, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"dashboard sign-in, url-encoded", "/ui/signin", "application/x-www-form-urlencoded", http.StatusRequestEntityTooLarge, "too large"},
		{"dashboard page behind sign-in", "/ui/t/default/clusters", multipartType, http.StatusUnsupportedMediaType, "application/x-www-form-urlencoded"},
		{"dashboard apply", "/ui/c/default/apply", "application/x-www-form-urlencoded", http.StatusRequestEntityTooLarge, "too large"},
		{"platform login", "/platform/v1/login", multipartType, http.StatusUnsupportedMediaType, "unsupported-media-type"},
		{"platform login, JSON", "/platform/v1/login", "application/json", http.StatusRequestEntityTooLarge, "too-large"},
		{"platform invitation", "/platform/v1/invitations/accept", "application/json", http.StatusRequestEntityTooLarge, "too-large"},
		{"platform join", "/platform/v1/join", multipartType, http.StatusUnsupportedMediaType, "unsupported-media-type"},
		{"kubernetes API", "/clusters/default/api/v1/namespaces/default/configmaps", multipartType, http.StatusUnauthorized, `"reason":"Unauthorized"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitSettled(t, tmp, before) // an earlier case's spool, if any, must not count against this one
			code, body := bigUpload(t, p.url, tc.path, tc.contentType, tmp)
			if code != tc.want || !strings.Contains(body, tc.wantBody) {
				t.Errorf("POST %s with a 300 MiB %s body: %d, want %d with %q in\n%.2000s", tc.path, tc.contentType, code,
					tc.want, tc.wantBody, body)
			}
		})
	}
	if grown := dirBytes(tmp) - before; grown > 0 {
		t.Errorf("the server's TMPDIR grew by %d bytes", grown)
	}
}

// uploadSize is the declared size of each upload: the attack's.
const uploadSize = 300 << 20

// bigUpload POSTs a body of uploadSize bytes of contentType to path over its own connection, streaming it in 1 MiB
// chunks (one field: in a multipart body a file part), and returns the server's answer. While it waits, it polls
// the server's TMPDIR: growing by over 1 MiB fails the test (the server is spooling the upload).
func bigUpload(t *testing.T, base, path, contentType, tmp string) (int, string) {
	t.Helper()
	before := dirBytes(tmp)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) // the test server's own CA
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() { // write errors are expected: a server that refused the body closes the connection
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, u.Host,
			contentType, uploadSize)
		head := "email=" // the start of a field whose value is the rest
		switch {
		case strings.HasPrefix(contentType, "multipart/"):
			head = "--wheelhouse-e2e\r\nContent-Disposition: form-data; name=\"email\"; filename=\"big\"\r\n" +
				"Content-Type: application/octet-stream\r\n\r\n"
		case contentType == "application/json":
			head = `{"email":"`
		}
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		chunk := []byte(strings.Repeat("a", 1<<20))
		for sent := len(head); sent < uploadSize; sent += len(chunk) {
			if sent+len(chunk) > uploadSize {
				chunk = chunk[:uploadSize-sent]
			}
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	}()
	type answer struct {
		code int
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		answered <- answer{code: resp.StatusCode, body: string(b), err: err}
	}()
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-answered:
			if a.err != nil {
				t.Fatalf("POST %s: no answer: %v", path, a.err)
			}
			return a.code, a.body
		case <-tick.C:
			if grown := dirBytes(tmp) - before; grown > 1<<20 {
				t.Fatalf("POST %s: the server spooled %d bytes of an unauthenticated upload to its TMPDIR", path, grown)
			}
		case <-deadline:
			t.Fatalf("POST %s: no answer within 2 minutes", path)
		}
	}
}

// waitSettled waits until the files under dir are back to at most size bytes.
func waitSettled(t *testing.T, dir string, size int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := dirBytes(dir); n > size; n = dirBytes(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's TMPDIR still holds %d bytes more than before the uploads", n-size)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dirBytes is the size of the files under dir (files that vanish while it looks are skipped).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, ierr := d.Info(); ierr == nil && !d.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
