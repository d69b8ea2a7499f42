package web

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/platform"
)

// multipartBody is a multipart/form-data body with fields and one file part of size bytes.
func multipartBody(t *testing.T, fields map[string]string, size int) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	f, err := w.CreateFormFile("upload", "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("x"), size)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, w.FormDataContentType()
}

// send POSTs body as contentType from this origin; length -1 sends it chunked (no Content-Length).
func (b *browser) send(path, contentType string, body io.Reader, length int64) *http.Response {
	b.e.t.Helper()
	req, err := http.NewRequestWithContext(b.e.t.Context(), http.MethodPost, b.e.srv.URL+path, body)
	if err != nil {
		b.e.t.Fatal(err)
	}
	if length < 0 {
		req.ContentLength = -1
		req.Body = io.NopCloser(body) // hides the length from the transport
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Origin", b.e.srv.URL)
	return b.do(req)
}

func errorTitle(doc *goquery.Document) string { return testid(doc, "error-title").Text() }

// TestFormsAreURLEncodedAndBounded: no dashboard route reads a multipart body (Go would spool its file parts to
// the temporary directory), signed in or not, and every form is bounded before anything reads it.
func TestFormsAreURLEncodedAndBounded(t *testing.T) {
	e := newEnv(t)
	anon := e.browser()
	owner := e.signedIn("owner@t1.example")
	creds := map[string]string{"email": "owner@t1.example", "password": testPassword}

	for _, tc := range []struct {
		name string
		b    *browser
		path string
	}{
		{"sign-in", anon, "/ui/signin"},
		{"invitation", anon, "/ui/invitation"},
		{"signed-in form", owner, "/ui/t/t1/clusters"},
		{"apply", owner, "/ui/c/c1/apply"},
	} {
		t.Run("multipart "+tc.name, func(t *testing.T) {
			fields := map[string]string{"id": "uploaded", "name": "Uploaded", "yaml": "kind: Namespace", csrfField: tc.b.csrf}
			for k, v := range creds {
				fields[k] = v
			}
			body, ct := multipartBody(t, fields, 1<<10)
			resp := tc.b.send(tc.path, ct, body, 0)
			doc := parsePage(t, resp, http.StatusUnsupportedMediaType)
			if msg := testid(doc, "error-message").Text(); !strings.Contains(msg, "application/x-www-form-urlencoded") {
				t.Errorf("415 message %q does not say what to send", msg)
			}
			for _, c := range resp.Cookies() {
				if c.Name == platform.SessionCookie {
					t.Error("a multipart sign-in started a session")
				}
			}
		})
	}
	if _, err := e.ten.Cluster(t.Context(), "uploaded"); err == nil {
		t.Error("a multipart form created a cluster")
	}

	big := strings.Repeat("a", maxFormBody)
	for _, tc := range []struct {
		name   string
		b      *browser
		path   string
		length int64 // 0: the body's; -1: chunked
	}{
		{"sign-in", anon, "/ui/signin", 0},
		{"sign-in, chunked", anon, "/ui/signin", -1},
		{"invitation", anon, "/ui/invitation", 0},
		{"signed-in form", owner, "/ui/t/t1/clusters", 0},
		{"signed-in form, chunked", owner, "/ui/t/t1/clusters", -1},
	} {
		t.Run("too large "+tc.name, func(t *testing.T) {
			form := url.Values{"email": {"owner@t1.example"}, "password": {testPassword}, "id": {"toolarge"},
				"name": {big}, csrfField: {tc.b.csrf}}
			doc := parsePage(t, tc.b.send(tc.path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()), tc.length),
				http.StatusRequestEntityTooLarge)
			if got := errorTitle(doc); got != "Form too large" {
				t.Errorf("413 page titled %q", got)
			}
		})
	}
	if _, err := e.ten.Cluster(t.Context(), "toolarge"); err == nil {
		t.Error("an oversize form created a cluster")
	}

	// The ordinary forms still work: sign-in from a fresh browser, a form behind the session.
	if resp := e.browser().post("/ui/signin", url.Values{"email": {"owner@t1.example"}, "password": {testPassword}}, false); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in after the refusals: %d", resp.StatusCode)
	}
	if resp := owner.post("/ui/t/t1/clusters", url.Values{"id": {"fine"}, "name": {"Fine"}}, true); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a form of ordinary size: %d", resp.StatusCode)
	}
}

// TestApplyTakesTheAPIsLimit: the YAML form takes a text up to the Kubernetes API's own request limit even when its
// url-encoding is larger than that (up to three times), and nothing larger.
func TestApplyTakesTheAPIsLimit(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn("owner@t1.example")
	// Two ConfigMaps of 600 KiB of ':' each: 1.2 MiB of YAML, 3.6 MiB url-encoded (%3A).
	value := strings.Repeat(":", 600<<10)
	yaml := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\ndata: {v: \"" + value + "\"}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\ndata: {v: \"" + value + "\"}\n"
	form := url.Values{"yaml": {yaml}, csrfField: {b.csrf}}.Encode()
	if len(form) <= 3<<20 {
		t.Fatalf("the form has %d bytes: the test needs one over 3 MiB", len(form))
	}
	doc := parsePage(t, b.send("/ui/c/c1/apply", "application/x-www-form-urlencoded", strings.NewReader(form), 0), http.StatusOK)
	if got := testid(doc, "apply-result"); got.Length() != 2 || !strings.Contains(got.Text(), "created") {
		t.Fatalf("apply: %q", got.Text())
	}
	for _, name := range []string{"one", "two"} {
		if cm, err := e.admin("c1").CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{}); err != nil || cm.Data["v"] != value {
			t.Fatalf("ConfigMap %s: %v", name, err)
		}
	}

	// Over the route's limit: refused before the YAML is looked at.
	huge := url.Values{"yaml": {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: huge}\ndata: {v: \"" +
		strings.Repeat(":", maxApplyBody/3+1) + "\"}\n"}, csrfField: {b.csrf}}.Encode()
	doc = parsePage(t, b.send("/ui/c/c1/apply", "application/x-www-form-urlencoded", strings.NewReader(huge), 0),
		http.StatusRequestEntityTooLarge)
	if got := errorTitle(doc); got != "Form too large" {
		t.Errorf("413 page titled %q", got)
	}
	if _, err := e.admin("c1").CoreV1().ConfigMaps("default").Get(t.Context(), "huge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an oversize apply created its ConfigMap: %v", err)
	}
}
