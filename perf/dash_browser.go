package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browserStartTimeout bounds Chromium's start; a loaded machine starts it in a few seconds.
const browserStartTimeout = time.Minute

// findChromium is bin when given, else the first of Debian's and the usual names on PATH.
func findChromium(bin string) (string, error) {
	if bin != "" {
		return exec.LookPath(bin)
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("no chromium, chromium-browser or google-chrome on PATH (apt-get install -y chromium, or --chromium)")
}

// startBrowser starts headless Chromium with the flags web/browsertest uses (no sandbox as root, no GPU, no
// /dev/shm, the server's self-signed certificate accepted) and opens one tab. The returned context is chromedp's
// handle on that tab; stop closes the browser and waits for it (chromedp also kills it if the harness dies:
// Pdeathsig). Its output goes to out.
func startBrowser(bin, userDataDir string, out io.Writer) (context.Context, func(), error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(userDataDir),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
		chromedp.IgnoreCertErrors, // the server's certificate is signed by its own CA
		chromedp.Flag("mute-audio", true),
		chromedp.CombinedOutput(out),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	stop := func() {
		closeCtx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		_ = chromedp.Cancel(closeCtx)
		cancelTab()
		cancelAlloc() // waits for the process
	}
	// The first Do starts the process and ties its life to the context it gets, which must therefore carry no
	// deadline: a timer ends a start that hangs.
	hung := time.AfterFunc(browserStartTimeout, cancelAlloc)
	err := chromedp.Do(tab)
	if !hung.Stop() {
		err = fmt.Errorf("no answer within %s: %w", browserStartTimeout, err)
	}
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return tab, stop, nil
}

// browserVersion is the browser's product string ("Chrome/142.0.…").
func browserVersion(tab context.Context) string {
	v, err := chromedp.CallBrowser(tab, browser.GetVersion, cdp.Empty{})
	if err != nil {
		return "unknown"
	}
	return v.Product
}

// pageProbe is installed in every document before its own scripts run. It records, in the page's clock
// (performance.timeOrigin + performance.now()):
//   - seen[name]: when a list row <tr data-testid="row" data-name=name> was first added to the DOM (a
//     MutationObserver; its callback runs right after the region's innerHTML swap, before layout and paint);
//   - frame[name]: when the first live fragment naming that row arrived (a listener on every WebSocket, added
//     before the page's own onmessage, so before the swap), prev[name] the previous fragment's arrival.
//
// wait(name, ms) resolves with {dom, frame, prev} once the row is seen; gone(name, ms) once no such row is left.
const pageProbe = `(() => {
  if (window.__dashperf) { return; }
  const now = () => performance.timeOrigin + performance.now();
  const d = window.__dashperf = { seen: {}, frame: {}, prev: {}, last: 0, frames: 0, waiters: {} };
  const names = /data-name=\\"([^"\\\\]+)\\"/g;
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (ev) => {
        const t = now();
        if (typeof ev.data !== "string" || !ev.data.startsWith('{"t":"frag"')) { return; }
        for (const m of ev.data.matchAll(names)) {
          if (!(m[1] in d.frame)) { d.frame[m[1]] = t; d.prev[m[1]] = d.last; }
        }
        d.last = t; d.frames++;
      });
    }
  };
  const saw = (row, t) => {
    const n = row.dataset.name;
    if (!n || n in d.seen) { return; }
    d.seen[n] = t;
    const w = d.waiters[n];
    if (w) { delete d.waiters[n]; w(); }
  };
  new MutationObserver((records) => {
    const t = now();
    for (const r of records) {
      for (const node of r.addedNodes) {
        if (node.nodeType !== 1) { continue; }
        if (node.matches('tr[data-testid="row"]')) { saw(node, t); }
        for (const row of node.querySelectorAll('tr[data-testid="row"]')) { saw(row, t); }
      }
    }
  }).observe(document, { childList: true, subtree: true });
  const result = (n) => ({ dom: d.seen[n], frame: d.frame[n] || 0, prev: d.prev[n] || 0 });
  d.wait = (n, ms) => new Promise((resolve, reject) => {
    if (n in d.seen) { resolve(result(n)); return; }
    const timer = setTimeout(() => { delete d.waiters[n]; reject(new Error(n + " not seen within " + ms + " ms")); }, ms);
    d.waiters[n] = () => { clearTimeout(timer); resolve(result(n)); };
  });
  d.gone = (n, ms) => new Promise((resolve, reject) => {
    const sel = 'tr[data-testid="row"][data-name="' + n + '"]';
    const t0 = now();
    const poll = () => {
      if (document.querySelector(sel) === null) { resolve(true); return; }
      if (now() - t0 > ms) { reject(new Error(n + " still shown after " + ms + " ms")); return; }
      setTimeout(poll, 5);
    };
    poll();
  });
})()`

// installProbe makes pageProbe run in every document the tab opens from now on.
func installProbe(tab context.Context) error {
	_, err := chromedp.Call(tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: pageProbe})
	return err
}

// browserSignIn signs the tab in with the dashboard's form.
func browserSignIn(ctx context.Context, base, email, password string) error {
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/signin"),
		chromedp.SetValue(chromedp.CSS("#email"), email),
		chromedp.SetValue(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("[data-testid=signin-submit]")),
		chromedp.WaitReady(chromedp.CSS("[data-testid=account-link]")),
	)
	if err != nil {
		return fmt.Errorf("sign in in the browser: %w", err)
	}
	return nil
}

// waitJS polls a JavaScript condition every 20 ms until it is true or timeout passes.
func waitJS(ctx context.Context, what, cond string, timeout time.Duration) error {
	return waitFor(ctx, timeout, what, func() bool {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ectx, chromedp.Evaluate[bool](cond))
		return err == nil && ok
	})
}

// evalJS evaluates expr in the tab (awaiting a promise) with a deadline of its own.
func evalJS[T any](ctx context.Context, timeout time.Duration, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pageTimes is what pageProbe's wait resolves with (page clock, ms).
type pageTimes struct {
	DOM   float64 `json:"dom"`
	Frame float64 `json:"frame"`
	Prev  float64 `json:"prev"`
}

// clockOffset measures the page's clock against the harness's: the page's time minus the midpoint of the
// harness's before and after, from the fastest of n round trips. It returns the offset and that round trip.
func clockOffset(ctx context.Context, n int) (time.Duration, time.Duration, error) {
	best, off := time.Duration(-1), time.Duration(0)
	for range n {
		before := time.Now()
		v, err := evalJS[float64](ctx, 5*time.Second, "performance.timeOrigin + performance.now()")
		after := time.Now()
		if err != nil {
			return 0, 0, fmt.Errorf("read the page's clock: %w", err)
		}
		rtt := after.Sub(before)
		if best < 0 || rtt < best {
			best = rtt
			off = msToTime(v).Sub(before.Add(rtt / 2))
		}
	}
	return off, best, nil
}

// msToTime is a Unix time in milliseconds (the page's clock) as a time.Time.
func msToTime(ms float64) time.Time {
	return time.Unix(0, int64(ms*1e6))
}

// sinceStart is a page time (ms) minus the harness's t0, corrected by the clock offset; 0 when the page never
// recorded one (ms <= 0).
func sinceStart(ms float64, t0 time.Time, offset time.Duration) time.Duration {
	if ms <= 0 {
		return 0
	}
	return msToTime(ms).Add(-offset).Sub(t0)
}

// quietOutput drops Chromium's complaints that it finds no D-Bus (a container has none) from its log's tail.
func quietOutput(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, ":ERROR:dbus/") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
