package agentapi

import (
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func testRewriter() *linkRewriter {
	return newLinkRewriter("/api/v1/namespaces/ns/pods/p/proxy", "api.example:6443", "http", netip.MustParseAddr("10.0.0.7"), 80)
}

func TestRewriteURL(t *testing.T) {
	l := testRewriter()
	for in, want := range map[string]string{
		"/a/b":                       "/api/v1/namespaces/ns/pods/p/proxy/a/b",
		"/a/b/?q=1#f":                "/api/v1/namespaces/ns/pods/p/proxy/a/b/?q=1#f",
		"http://10.0.0.7/x":          "/api/v1/namespaces/ns/pods/p/proxy/x", // the pod's own host, default port
		"http://10.0.0.7:80/x":       "/api/v1/namespaces/ns/pods/p/proxy/x",
		"https://api.example:6443/y": "https://api.example:6443/api/v1/namespaces/ns/pods/p/proxy/y", // the host asked
		"http://10.0.0.7:81/x":       "http://10.0.0.7:81/x",                                         // another port
		"https://other.example/x":    "https://other.example/x",
		"relative/x":                 "relative/x",
		"#top":                       "#top",
		"/api/v1/namespaces/ns/pods/p/proxy/already": "/api/v1/namespaces/ns/pods/p/proxy/already",
		"/../../../etc": "/api/v1/namespaces/ns/pods/p/proxy/etc", // cannot climb out of the prefix
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.rewrite(u); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func rewriteString(t *testing.T, page string) string {
	t.Helper()
	var out bytes.Buffer
	if err := rewriteHTML(&out, strings.NewReader(page), testRewriter().rewrite); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestRewriteHTMLKeepsWhatItDoesNotRewrite(t *testing.T) {
	for in, want := range map[string]string{
		`<p class=x>text &amp; more</p><!-- <a href="/c"> --><a href="/x">`: `<p class=x>text &amp; more</p><!-- <a href="/c"> --><a href="/api/v1/namespaces/ns/pods/p/proxy/x">`,
		`<a name=top>unchanged</a><a href=rel>`:                             `<a name=top>unchanged</a><a href=rel>`,
		`<style>a[href="/x"]{}</style><textarea><a href="/y"></textarea>`:   `<style>a[href="/x"]{}</style><textarea><a href="/y"></textarea>`,
		`<a href="/end"`: `<a href="/end"`, // a tag the page breaks off in passes as it came
		"":               "",
	} {
		if got := rewriteString(t, in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestRewriteHTMLLongToken: a token past maxHTMLToken is not held; the rest of the page passes unchanged.
func TestRewriteHTMLLongToken(t *testing.T) {
	long := `<a href="/first"><div title="` + strings.Repeat("x", 2*maxHTMLToken) + `">` + `<a href="/after">`
	got := rewriteString(t, long)
	want := `<a href="/api/v1/namespaces/ns/pods/p/proxy/first">` + long[len(`<a href="/first">`):]
	if got != want {
		t.Errorf("long token: got %d bytes starting %q, want %d", len(got), got[:min(len(got), 80)], len(want))
	}
}

// TestRewriteResponseSkips: only HTML bodies in an encoding the rewriter reads are rewritten, never HEAD's.
func TestRewriteResponseSkips(t *testing.T) {
	for _, c := range []struct {
		name, method, contentType, encoding string
		rewritten                           bool
	}{
		{"html", "GET", "text/html; charset=utf-8", "", true},
		{"upper-case html", "GET", "TEXT/HTML", "", true},
		{"json", "GET", "application/json", "", false},
		{"brotli", "GET", "text/html", "br", false},
		{"head", "HEAD", "text/html", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := `<a href="/x">`
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {c.contentType},
				"Content-Length": {"13"}}, Body: io.NopCloser(strings.NewReader(page)), ContentLength: 13,
				Request: &http.Request{Method: c.method}}
			if c.encoding != "" {
				resp.Header.Set("Content-Encoding", c.encoding)
			}
			testRewriter().response(resp)
			b, _ := io.ReadAll(resp.Body)
			if got := string(b) != page; got != c.rewritten {
				t.Errorf("rewritten %v (%q), want %v", got, b, c.rewritten)
			}
			if c.rewritten && (resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "") {
				t.Errorf("a rewritten body keeps its length: %d %q", resp.ContentLength, resp.Header.Get("Content-Length"))
			}
		})
	}
}

// FuzzRewriteHTML: any page is copied without an error; text without tags passes byte for byte.
func FuzzRewriteHTML(f *testing.F) {
	for _, s := range []string{testPageSeed, "<a href=/x", "<<a href='/'>>", "<script><a href=/x></script>", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, page string) {
		var out bytes.Buffer
		if err := rewriteHTML(&out, strings.NewReader(page), testRewriter().rewrite); err != nil {
			t.Fatalf("%q: %v", page, err)
		}
		if !strings.Contains(page, "<") && out.String() != page {
			t.Fatalf("%q became %q", page, out.String())
		}
	})
}

const testPageSeed = `<!DOCTYPE html><html><body><a href="/x">x</a><img src="http://10.0.0.7/i.png"></body></html>`
