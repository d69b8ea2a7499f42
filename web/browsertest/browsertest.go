package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Environment variables the package reads (the test binary's own, like pgtest.EnvURL).
const (
	// EnvChromium names the browser binary to run instead of looking one up on PATH.
	EnvChromium = "WHEELHOUSE_CHROMIUM"
	// EnvArtifacts names the directory screenshots go to instead of <repo root>/.artifacts.
	EnvArtifacts = "WHEELHOUSE_ARTIFACTS"
)

// TabTimeout bounds everything a tab does: its context ends this long after NewTab.
const TabTimeout = 2 * time.Minute

// startTimeout bounds Chromium's start; a loaded CI machine starts it in a few seconds.
const startTimeout = time.Minute

// binaries are looked up on PATH in this order when EnvChromium is unset.
var binaries = []string{"chromium", "chromium-browser", "google-chrome"}

// Browser is one headless Chromium process, stopped when the test that started it ends.
type Browser struct {
	// ctx is chromedp's handle on the running browser (its tabs are contexts derived from it); chromedp
	// offers no other handle, which is why a context lives in a struct here. It ends in the test's cleanup.
	ctx context.Context
}

// New starts Chromium for the test and stops it in t.Cleanup. It fails the test when no browser is installed or
// when it does not start; it never skips.
func New(t testing.TB) *Browser {
	t.Helper()
	bin, err := findBrowser()
	if err != nil {
		t.Fatalf("browsertest: %v; run scripts/ensure-tools.sh (as root it installs Debian's chromium), or set %s", err, EnvChromium)
	}
	out := &tailBuffer{max: 64 << 10}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocatorOptions(bin, t.TempDir(), out)...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)

	// The first Run starts the process and ties its life to the context it is given, so that context must not
	// carry a deadline: a timer kills a start that hangs instead.
	hung := time.AfterFunc(startTimeout, cancelAlloc)
	err = chromedp.Do(ctx)
	if !hung.Stop() {
		err = fmt.Errorf("no answer within %v: %w", startTimeout, err)
	}
	stop := func() {
		closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Cancel(closeCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("browsertest: closing %s: %v", bin, err)
		}
		cancelBrowser()
		cancelAlloc() // waits for the process and its output
		if t.Failed() && out.Len() > 0 {
			t.Logf("browsertest: output of %s (the last %d bytes, D-Bus complaints left out):\n%s", bin, out.max, out.quiet())
		}
	}
	if err != nil {
		stop()
		t.Fatalf("browsertest: starting %s: %v\n%s", bin, err, out.quiet())
	}
	t.Cleanup(stop)
	return &Browser{ctx: ctx}
}

// findBrowser returns the binary to run: EnvChromium, else the first of binaries on PATH.
func findBrowser() (string, error) {
	if bin := os.Getenv(EnvChromium); bin != "" {
		path, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvChromium, bin, err)
		}
		return path, nil
	}
	for _, name := range binaries {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("none of %s is on PATH", strings.Join(binaries, ", "))
}

// allocatorOptions are chromedp's defaults (Puppeteer's: no background throttling, no extensions, no sync, ...)
// plus what the dashboard's tests need.
func allocatorOptions(bin, userDataDir string, out *tailBuffer) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(userDataDir), // removed with the test's TempDir, after the browser has stopped
		chromedp.Headless,                 // also hides scrollbars, so screenshots do not depend on them
		chromedp.DisableGPU,               // no GPU on CI; Chromium renders in software
		// /dev/shm is 64 MiB in a default container and Chromium crashes when it fills; use /tmp instead.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(int(Desktop.Width), int(Desktop.Height)),
		// Test servers (httptest.NewTLSServer) present certificates of their own throwaway CA, which no trust
		// store knows. The browser talks to nothing but those servers.
		chromedp.IgnoreCertErrors,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("mute-audio", true),
		chromedp.CombinedOutput(out),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its sandbox on ("Running as root without --no-sandbox is not
		// supported"): the sandbox's privilege drop assumes an unprivileged user. CI runs `make test` as root;
		// the pages it loads are our own test servers'. As any other user the sandbox stays on.
		opts = append(opts, chromedp.NoSandbox)
	}
	return opts
}

// NewTab opens a tab in a new browser context (its own cookie jar, storage and cache) with the Desktop viewport,
// and closes it in t.Cleanup. The returned context ends after TabTimeout at the latest; derive shorter ones from
// it for single steps. The tab's console errors and uncaught exceptions go to t.Log.
func (b *Browser) NewTab(t testing.TB) context.Context {
	t.Helper()
	tabCtx, closeTab := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	// The first Run on a tab ties the tab's life to its context, so it runs here on the context handed out: a
	// caller's narrower context must not end the tab.
	ctx, cancel := context.WithTimeout(tabCtx, TabTimeout)
	if err := chromedp.Do(ctx, viewport(Desktop)); err != nil {
		cancel()
		closeTab()
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	logged := forwardConsole(t, ctx)
	t.Cleanup(func() {
		cancel()
		<-logged
		closeTab()
	})
	return ctx
}

// forwardConsole writes the tab's console errors, uncaught exceptions and failed loads to t.Log until ctx ends;
// the returned channel is closed when it has stopped.
func forwardConsole(t testing.TB, ctx context.Context) <-chan struct{} {
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			where := ""
			if m.URL != "" {
				where = fmt.Sprintf(" (%s:%d)", m.URL, m.Line+1)
			}
			t.Logf("browser console: %s%s", m, where)
		}
	}()
	return done
}

// Viewport is the size of a tab's page and how it presents itself.
type Viewport struct {
	Width, Height int64   // CSS pixels: window.innerWidth and innerHeight
	Scale         float64 // device pixels per CSS pixel: window.devicePixelRatio
	Mobile        bool    // a phone: mobile layout rules, touch events, portrait
}

var (
	// Desktop is a laptop browser window, every tab's viewport until SetViewport.
	Desktop = Viewport{Width: 1280, Height: 900, Scale: 1}
	// Phone is a current iPhone's screen. A page laid out for it needs
	// <meta name="viewport" content="width=device-width">; without it a mobile browser lays the page out 980 px
	// wide and shrinks it.
	Phone = Viewport{Width: 390, Height: 844, Scale: 2, Mobile: true}
)

// SetViewport emulates v in the tab of ctx from now on (the loaded page re-lays itself out).
func SetViewport(ctx context.Context, v Viewport) error {
	if err := chromedp.Do(ctx, viewport(v)); err != nil {
		return fmt.Errorf("browsertest: setting the viewport to %dx%d: %w", v.Width, v.Height, err)
	}
	return nil
}

func viewport(v Viewport) chromedp.Action[chromedp.Void] {
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(v.Scale)}
	if v.Mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	return chromedp.EmulateViewport(v.Width, v.Height, opts...)
}

// WaitText waits until the first element matching the CSS selector exists and its textContent contains
// substring, or until ctx ends. It polls inside the page on every animation frame, and starts over in the new
// document when the page navigates meanwhile. The error names the element's text at the end.
func WaitText(ctx context.Context, selector, substring string) error {
	const predicate = `(selector, substring) => {
		const el = document.querySelector(selector);
		return el !== null && el.textContent.includes(substring);
	}`
	err := poll(ctx, predicate, selector, substring)
	if err != nil {
		return fmt.Errorf("browsertest: waiting for %s to contain %q: %w (its text: %s)", selector, substring, err, textOf(ctx, selector))
	}
	return nil
}

// WaitGone waits until no element matches the CSS selector (an element hidden but still present does not
// count), or until ctx ends.
func WaitGone(ctx context.Context, selector string) error {
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(selector))); err != nil {
		return fmt.Errorf("browsertest: waiting for %s to be gone: %w", selector, err)
	}
	return nil
}

// poll runs the JavaScript predicate with args in the page until it returns true or ctx ends. The page stops
// polling at ctx's deadline too. A navigation destroys the poll with its document: it then starts again in the
// new one, a few milliseconds later. An exception in the predicate (say, an invalid selector) ends it at once.
func poll(ctx context.Context, predicate string, args ...any) error {
	for {
		timeout := time.Duration(0) // none: ctx alone ends the wait
		if deadline, ok := ctx.Deadline(); ok {
			timeout = max(time.Until(deadline), time.Millisecond)
		}
		_, err := chromedp.Run(ctx, chromedp.PollFunction[chromedp.Void](predicate,
			chromedp.WithPollingArgs(args...), chromedp.WithPollingTimeout(timeout)))
		var exception *chromedp.ExceptionError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, chromedp.ErrPollingTimeout):
			return context.DeadlineExceeded
		case errors.As(err, &exception):
			return err
		}
		select { // the document went away under the poll; wait for the next one
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// textOf describes the text of the first element matching selector, for an error message. ctx may have ended
// already: it only supplies the tab.
func textOf(ctx context.Context, selector string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	quoted, _ := json.Marshal(selector)
	text, err := chromedp.Run(ctx, chromedp.Evaluate[*string](fmt.Sprintf(
		`(() => { const el = document.querySelector(%s); return el === null ? null : el.textContent; })()`, quoted)))
	switch {
	case err != nil:
		return "unknown: " + err.Error()
	case text == nil:
		return "no element matches"
	default:
		return fmt.Sprintf("%q", *text)
	}
}

// Screenshot writes a full-page PNG of the tab of ctx to <artifacts>/<test name>/<name>.png, logs its path and
// returns it. ctx only supplies the tab: the capture has a deadline of its own, so a failing test can still take
// one in its cleanup. A failure is reported with t.Errorf, and the path is then "".
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	dir, err := artifactsDir()
	if err != nil {
		t.Errorf("browsertest: screenshot %s: %v", name, err)
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 means PNG
	if err != nil {
		t.Errorf("browsertest: screenshot %s: %v", name, err)
		return ""
	}
	dir = filepath.Join(dir, sanitize(t.Name()))
	path := filepath.Join(dir, sanitize(name)+".png")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("browsertest: screenshot %s: %v", name, err)
		return ""
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("browsertest: screenshot %s: %v", name, err)
		return ""
	}
	t.Logf("browsertest: screenshot %s", path)
	return path
}

// artifactsDir is EnvArtifacts, else .artifacts beside the go.mod found walking up from the working directory
// (a package's directory under go test).
func artifactsDir() (string, error) {
	if dir := os.Getenv(EnvArtifacts); dir != "" {
		return dir, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".artifacts"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory; set %s", EnvArtifacts)
		}
		dir = parent
	}
}

// sanitize makes s one safe path element: letters, digits, '.', '-' and '_' stay, anything else (the '/' of a
// subtest's name, spaces, ...) becomes '_'.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
	if strings.Trim(s, ".") == "" {
		return strings.Repeat("_", len(s)+1) // never "", "." or ".."
	}
	return s
}

// tailBuffer keeps the last max bytes written to it: Chromium's output, shown when a test fails.
type tailBuffer struct {
	max int
	mu  sync.Mutex // guards buf; Chromium's output is copied in by a chromedp goroutine
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

// quiet is the output without Chromium's complaints that it finds no D-Bus, which a container or CI machine has
// none of and which drown everything else.
func (b *tailBuffer) quiet() string {
	lines := strings.SplitAfter(b.String(), "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, ":ERROR:dbus/") }), "")
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
