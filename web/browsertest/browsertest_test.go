package browsertest

import (
	"context"
	"errors"
	"fmt"
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// cookieName is a __Host- cookie: the browser keeps it only from a secure origin, with Secure, Path=/ and no
// Domain, as the dashboard's session cookie.
const cookieName = "__Host-test"

// newTestServer serves, over TLS with httptest's own CA:
//
//	/            a page whose script replaces #status's text after a fetch and removes #spinner
//	/login?user= sets the cookie to user
//	/whoami      echoes the cookie in #user
//	/later       navigates itself to /whoami shortly after loading
//	/broken      logs a console error and throws
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	page := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,"><title>browsertest</title>
<style>body { font: 16px "Liberation Sans", sans-serif; margin: 2rem; }</style></head><body>%s</body></html>`, body)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<h1>browsertest</h1><p id="status">loading</p><div id="spinner">…</div>
<script>
fetch("/api/greeting").then(r => r.text()).then(text => {
	document.getElementById("status").textContent = "fetched: " + text;
	document.getElementById("spinner").remove();
});
</script>`)
	})
	mux.HandleFunc("GET /api/greeting", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	})
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		user := r.URL.Query().Get("user")
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: user, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		})
		page(w, `<p id="signed-in">signed in as `+html.EscapeString(user)+`</p>`)
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		user := "(none)"
		if c, err := r.Cookie(cookieName); err == nil {
			user = c.Value
		}
		page(w, `<p id="user">user: `+html.EscapeString(user)+`</p>`)
	})
	mux.HandleFunc("GET /later", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<p>moving on</p><script>setTimeout(() => location.assign("/whoami"), 200);</script>`)
	})
	mux.HandleFunc("GET /broken", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<script>console.error("broken page: console error"); throw new Error("broken page: uncaught");</script>`)
	})
	ts := httptest.NewTLSServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func TestBrowser(t *testing.T) {
	b := New(t)
	ts := newTestServer(t)

	t.Run("DOMChangeAfterFetch", func(t *testing.T) {
		tab := b.NewTab(t)
		navigate(t, tab, ts.URL+"/")
		if err := WaitText(tab, "#status", "fetched: hello"); err != nil {
			t.Fatal(err)
		}
		if err := WaitGone(tab, "#spinner"); err != nil {
			t.Fatal(err)
		}
		if got := evaluate[int](t, tab, "window.innerWidth"); got != 1280 {
			t.Errorf("window.innerWidth = %d, want 1280", got)
		}
		checkPNG(t, Screenshot(t, tab, "desktop"), 1280)
	})

	t.Run("HostCookieRoundTrip", func(t *testing.T) {
		tab := b.NewTab(t)
		signIn(t, tab, ts.URL, "alice")
		navigate(t, tab, ts.URL+"/whoami")
		if err := WaitText(tab, "#user", "user: alice"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("TabsHaveSeparateCookies", func(t *testing.T) {
		alice, bob := b.NewTab(t), b.NewTab(t)
		signIn(t, alice, ts.URL, "alice")
		navigate(t, bob, ts.URL+"/whoami")
		if err := WaitText(bob, "#user", "user: (none)"); err != nil {
			t.Fatal(err)
		}
		signIn(t, bob, ts.URL, "bob")
		for user, tab := range map[string]context.Context{"alice": alice, "bob": bob} {
			navigate(t, tab, ts.URL+"/whoami")
			if err := WaitText(tab, "#user", "user: "+user); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("PhoneViewport", func(t *testing.T) {
		tab := b.NewTab(t)
		if err := SetViewport(tab, Phone); err != nil {
			t.Fatal(err)
		}
		navigate(t, tab, ts.URL+"/")
		if err := WaitText(tab, "#status", "fetched: hello"); err != nil {
			t.Fatal(err)
		}
		if got := evaluate[int](t, tab, "window.innerWidth"); got != 390 {
			t.Errorf("window.innerWidth = %d, want 390", got)
		}
		if got := evaluate[float64](t, tab, "window.devicePixelRatio"); got != 2 {
			t.Errorf("window.devicePixelRatio = %v, want 2", got)
		}
		if !evaluate[bool](t, tab, `matchMedia("(pointer: coarse)").matches`) {
			t.Error(`matchMedia("(pointer: coarse)") does not match: no touch emulation`)
		}
		checkPNG(t, Screenshot(t, tab, "phone"), 390*2)
	})

	t.Run("WaitTextAcrossNavigation", func(t *testing.T) {
		tab := b.NewTab(t)
		navigate(t, tab, ts.URL+"/later")
		if err := WaitText(tab, "#user", "user: (none)"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("WaitTextDeadline", func(t *testing.T) {
		tab := b.NewTab(t)
		navigate(t, tab, ts.URL+"/")
		if err := WaitText(tab, "#status", "fetched: hello"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(tab, 300*time.Millisecond)
		defer cancel()
		err := WaitText(ctx, "#status", "never shown")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `its text: "fetched: hello"`) {
			t.Errorf("WaitText past the deadline: %v, want context.DeadlineExceeded naming the current text", err)
		}
		if err := WaitText(ctx, "#missing", "x"); err == nil || !strings.Contains(err.Error(), "no element matches") {
			t.Errorf("WaitText for a missing element: %v, want an error saying no element matches", err)
		}
		if err := WaitGone(ctx, "#status"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitGone past the deadline: %v, want context.DeadlineExceeded", err)
		}
		// The tab outlives the narrower context.
		if err := WaitText(tab, "#status", "fetched: hello"); err != nil {
			t.Errorf("the tab after a step's deadline: %v", err)
		}
	})

	t.Run("WaitTextInvalidSelector", func(t *testing.T) {
		tab := b.NewTab(t)
		navigate(t, tab, ts.URL+"/")
		var exception *chromedp.ExceptionError
		if err := WaitText(tab, "#status[", "x"); !errors.As(err, &exception) {
			t.Errorf("WaitText with an invalid selector: %v, want the page's exception", err)
		}
	})

	t.Run("ConsoleForwarded", func(t *testing.T) {
		rec := &logRecorder{TB: t, lines: make(chan string, 64)}
		tab := b.NewTab(rec)
		navigate(t, tab, ts.URL+"/broken")
		if err := rec.wait(tab, "broken page: console error", "broken page: uncaught"); err != nil {
			t.Error(err)
		}
	})
}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TestBrowser/PhoneViewport", "TestBrowser_PhoneViewport"},
		{"Test/two words#01", "Test_two_words_01"},
		{"desktop-1.2_x", "desktop-1.2_x"},
		{"..", "___"},
		{"", "_"},
	} {
		if got := sanitize(tc.in); got != tc.want {
			t.Errorf("sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFindBrowser(t *testing.T) {
	t.Run("EnvFirst", func(t *testing.T) {
		bin := writeExecutable(t)
		t.Setenv(EnvChromium, bin)
		if got, err := findBrowser(); got != bin || err != nil {
			t.Errorf("findBrowser() = %q, %v, want %q", got, err, bin)
		}
	})
	t.Run("EnvMissing", func(t *testing.T) {
		t.Setenv(EnvChromium, filepath.Join(t.TempDir(), "no-such-browser"))
		if _, err := findBrowser(); err == nil || !strings.Contains(err.Error(), EnvChromium) {
			t.Errorf("findBrowser() error = %v, want one naming %s", err, EnvChromium)
		}
	})
	t.Run("NoneOnPath", func(t *testing.T) {
		t.Setenv(EnvChromium, "")
		t.Setenv("PATH", t.TempDir())
		if _, err := findBrowser(); err == nil || !strings.Contains(err.Error(), "chromium") {
			t.Errorf("findBrowser() error = %v, want one naming chromium", err)
		}
	})
}

// writeExecutable writes an executable file and returns its path.
func writeExecutable(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func navigate(t *testing.T, tab context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate to %s: %v", url, err)
	}
}

func signIn(t *testing.T, tab context.Context, base, user string) {
	t.Helper()
	navigate(t, tab, base+"/login?user="+user)
	if err := WaitText(tab, "#signed-in", "signed in as "+user); err != nil {
		t.Fatal(err)
	}
}

func evaluate[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// checkPNG checks that path holds a PNG wantWidth device pixels wide.
func checkPNG(t *testing.T, path string, wantWidth int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("screenshot %s: not a PNG: %v", path, err)
	}
	if cfg.Width != wantWidth {
		t.Errorf("screenshot %s is %dx%d, want %d wide", path, cfg.Width, cfg.Height, wantWidth)
	}
}

// logRecorder is the test's testing.TB that also hands every logged line to lines.
type logRecorder struct {
	testing.TB
	lines chan string
}

func (r *logRecorder) Logf(format string, args ...any) {
	r.TB.Logf(format, args...)
	select {
	case r.lines <- fmt.Sprintf(format, args...):
	default:
	}
}

// wait waits until each of wants is in a logged line, or until ctx ends.
func (r *logRecorder) wait(ctx context.Context, wants ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(wants) > 0 {
		select {
		case line := <-r.lines:
			wants = slices.DeleteFunc(wants, func(want string) bool { return strings.Contains(line, want) })
		case <-ctx.Done():
			return fmt.Errorf("no log line contains %q: %w", wants, ctx.Err())
		}
	}
	return nil
}
