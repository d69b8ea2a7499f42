package openapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// do runs a handler on a request with the given headers.
func do(h http.HandlerFunc, method, target string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h(rec, req)
	return rec
}

func TestServeConditional(t *testing.T) {
	s := testSpec(t)
	root := func(w http.ResponseWriter, r *http.Request) { s.ServeV3Root(w, r, testPrefix) }
	apps := func(w http.ResponseWriter, r *http.Request) {
		s.ServeV3GroupVersion(w, r, testPrefix, "apis/apps/v1")
	}
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		target  string
		accept  string
	}{
		{"v2 json", s.ServeV2, "/openapi/v2", ""},
		{"v2 protobuf", s.ServeV2, "/openapi/v2", mediaV2ProtoDeprecated},
		{"v3 root", root, "/openapi/v3", ""},
		{"v3 group version", apps, "/openapi/v3/apis/apps/v1", "application/json"},
		{"v3 protobuf", apps, "/openapi/v3/apis/apps/v1", mediaV3ProtoDeprecated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first := do(tt.handler, "GET", tt.target, "Accept", tt.accept)
			etag := first.Header().Get("ETag")
			if first.Code != http.StatusOK || etag == "" || first.Body.Len() == 0 {
				t.Fatalf("GET: %d, ETag %q, %d bytes", first.Code, etag, first.Body.Len())
			}
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				again := do(tt.handler, "GET", tt.target, "Accept", tt.accept, "If-None-Match", inm)
				if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
					t.Errorf("If-None-Match %s: %d with %d bytes, want 304 and none", inm, again.Code, again.Body.Len())
				}
			}
			if stale := do(tt.handler, "GET", tt.target, "Accept", tt.accept, "If-None-Match", `"stale"`); stale.Code != http.StatusOK {
				t.Errorf("stale If-None-Match: %d, want 200", stale.Code)
			}
			if head := do(tt.handler, "HEAD", tt.target, "Accept", tt.accept); head.Code != http.StatusOK || head.Body.Len() != 0 {
				t.Errorf("HEAD: %d with %d bytes", head.Code, head.Body.Len())
			}
		})
	}
}

func TestServeNegotiation(t *testing.T) {
	s := testSpec(t)
	for _, tt := range []struct{ accept, want string }{
		{"", "application/json"},
		{"*/*", "application/json"},
		{"application/json, */*", "application/json"},
		{mediaV2ProtoDeprecated, mediaV2Proto},
		{mediaV2Proto, mediaV2Proto},
		{"application/json;q=0.5, " + mediaV2ProtoDeprecated, mediaV2Proto},
	} {
		rec := do(s.ServeV2, "GET", "/openapi/v2", "Accept", tt.accept)
		if got := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || got != tt.want {
			t.Errorf("Accept %q: %d %q, want 200 %q", tt.accept, rec.Code, got, tt.want)
		}
	}
	json1 := do(s.ServeV2, "GET", "/openapi/v2").Header().Get("ETag")
	pb := do(s.ServeV2, "GET", "/openapi/v2", "Accept", mediaV2Proto).Header().Get("ETag")
	if json1 == pb {
		t.Error("the JSON and protobuf forms share an entity tag")
	}
	rec := do(s.ServeV2, "GET", "/openapi/v2", "Accept", "text/html")
	expectStatus(t, rec, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable)
}

func TestServeV3Hash(t *testing.T) {
	s := testSpec(t)
	serve := func(gv string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { s.ServeV3GroupVersion(w, r, testPrefix, gv) }
	}
	var root v3Discovery
	if err := json.Unmarshal(do(func(w http.ResponseWriter, r *http.Request) {
		s.ServeV3Root(w, r, testPrefix)
	}, "GET", "/openapi/v3").Body.Bytes(), &root); err != nil {
		t.Fatal(err)
	}
	current := root.Paths["apis/apps/v1"].ServerRelativeURL
	if !strings.HasPrefix(current, testPrefix+"/openapi/v3/apis/apps/v1?hash=") {
		t.Fatalf("serverRelativeURL = %q", current)
	}

	rec := do(serve("apis/apps/v1"), "GET", current)
	if got := rec.Header().Get("Cache-Control"); rec.Code != http.StatusOK || got != "public, max-age=31536000, immutable" {
		t.Errorf("current hash: %d, Cache-Control %q", rec.Code, got)
	}
	if hash := strings.TrimPrefix(current, testPrefix+"/openapi/v3/apis/apps/v1?hash="); `"`+hash+`"` != rec.Header().Get("ETag") {
		t.Errorf("hash %s is not the ETag %s", hash, rec.Header().Get("ETag"))
	}

	rec = do(serve("apis/apps/v1"), "GET", testPrefix+"/openapi/v3/apis/apps/v1?hash=OLD")
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusMovedPermanently || loc != current {
		t.Errorf("old hash: %d to %q, want 301 to %q", rec.Code, loc, current)
	}

	rec = do(serve("apis/apps/v1"), "GET", testPrefix+"/openapi/v3/apis/apps/v1")
	if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "" {
		t.Errorf("no hash: %d, Cache-Control %q; want 200 and none", rec.Code, rec.Header().Get("Cache-Control"))
	}

	expectStatus(t, do(serve("apis/batch/v1"), "GET", "/openapi/v3/apis/batch/v1"), http.StatusNotFound,
		metav1.StatusReasonNotFound)
	expectStatus(t, do(serve("apis/apps/v1"), "POST", "/openapi/v3/apis/apps/v1"), http.StatusMethodNotAllowed,
		metav1.StatusReasonMethodNotAllowed)
}

func TestServeGzip(t *testing.T) {
	s := testSpec(t)
	rec := do(s.ServeV2, "GET", "/openapi/v2", "Accept-Encoding", "gzip")
	if rec.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q", rec.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, s.v2.json.body) {
		t.Error("the gzipped body is not the document")
	}
	for _, enc := range []string{"", "identity", "gzip;q=0", "br"} {
		if rec := do(s.ServeV2, "GET", "/openapi/v2", "Accept-Encoding", enc); rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q got Content-Encoding %q", enc, rec.Header().Get("Content-Encoding"))
		}
	}
}

func expectStatus(t *testing.T, rec *httptest.ResponseRecorder, code int, reason metav1.StatusReason) {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("%d body %q: %v", rec.Code, rec.Body, err)
	}
	if rec.Code != code || st.Code != int32(code) || st.Reason != reason || st.Kind != "Status" {
		t.Errorf("got %d %+v, want %d %s", rec.Code, st, code, reason)
	}
}

// TestServeConcurrently has many clients ask for the lazily built forms at once (run with -race).
func TestServeConcurrently(t *testing.T) {
	s := testSpec(t)
	apps := func(w http.ResponseWriter, r *http.Request) {
		s.ServeV3GroupVersion(w, r, testPrefix, "apis/apps/v1")
	}
	done := make(chan []byte)
	for i := range 8 {
		go func() {
			h, accept := http.HandlerFunc(s.ServeV2), mediaV2Proto
			if i%2 == 1 {
				h, accept = apps, mediaV3Proto
			}
			rec := do(h, "GET", "/", "Accept", accept, "Accept-Encoding", "gzip")
			done <- rec.Body.Bytes()
		}()
	}
	sizes := map[int]bool{}
	for range 8 {
		sizes[len(<-done)] = true
	}
	if len(sizes) != 2 {
		t.Errorf("8 responses of 2 documents had %d sizes", len(sizes))
	}
}
