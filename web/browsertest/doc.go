// Package browsertest drives a real headless Chromium from tests, through chromedp, so the dashboard is checked
// as a browser runs it: its scripts, its cookies, its layout at 1280 px and on a phone.
//
// New starts one Chromium process per call and stops it when the test ends. NewTab opens a tab in a browser
// context of its own, so tabs from two calls share no cookies, storage or cache: two users can be signed in side
// by side. WaitText and WaitGone wait for the page; Screenshot keeps a full-page PNG as a test artifact.
//
// Guarantees:
//   - The browser binary is $WHEELHOUSE_CHROMIUM, else the first of chromium, chromium-browser and google-chrome
//     on PATH. With none, New fails the test (never skips it): scripts/ensure-tools.sh installs Debian's chromium,
//     and `make test` runs that script first.
//   - Chromium accepts any TLS certificate, so an httptest.NewTLSServer (its own throwaway CA) serves the dashboard
//     over https, where Secure and __Host- cookies work as in production.
//   - A tab's context ends TabTimeout after NewTab at the latest, and when the test ends; narrow it with
//     context.WithTimeout for one step. The waits take their deadline from the context and never sleep: they
//     poll inside the page (on every animation frame) or through chromedp's queries.
//   - A tab's console errors, uncaught exceptions and failed loads are written to the test log as they happen,
//     and Chromium's own output is written there when the test fails.
//   - Screenshots go to $WHEELHOUSE_ARTIFACTS, else to .artifacts at the repository root (the directory that
//     holds go.mod), in a directory per test; failing to write one is a test error, not a fatal one.
//
// A tab is one chromedp context: use it with chromedp.Do and chromedp.Run from one goroutine at a time.
package browsertest
