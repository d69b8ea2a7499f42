package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/web/browsertest"
)

// The dashboard, driven the way people use it: headless Chromium (Debian's chromium, through chromedp) against
// the real binary, a real node agent in a network namespace running real pods, kubectl beside it. Screenshots of
// every page land in .artifacts/ (or $WHEELHOUSE_ARTIFACTS).

const dashPassword = "e2e-dashboard-password-1"

// tickerManifest is a Deployment whose pods print a line every 200 ms (its env var makes a second revision).
func tickerManifest(podBin, version string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: ticker, namespace: default}
spec:
  replicas: %d
  selector: {matchLabels: {app: ticker}}
  template:
    metadata: {labels: {app: ticker}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: tick
        image: podserver
        command: [%s, tick]
        env: [{name: VERSION, value: %q}]
`, replicas, podBin, version)
}

// tab is one browser tab signed in (or not) to the server.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func (b tab) open(path string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.base+path)); err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
}

func (b tab) fill(sel, value string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.SetValue(chromedp.CSS(sel), value)); err != nil {
		b.t.Fatalf("fill %s: %v", sel, err)
	}
}

func (b tab) click(sel string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("click %s: %v", sel, err)
	}
}

// waitText waits until the element matched by sel contains text (the page may navigate meanwhile).
func (b tab) waitText(sel, text string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := browsertest.WaitText(ctx, sel, text); err != nil {
		browsertest.Screenshot(b.t, b.ctx, "failed-wait")
		b.t.Fatalf("waiting for %q in %s: %v", text, sel, err)
	}
}

// eval runs JavaScript in the page and returns its value.
func evalIn[T any](b tab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until a JavaScript condition holds.
func (b tab) waitJS(what, cond string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			browsertest.Screenshot(b.t, b.ctx, "failed-wait")
			b.t.Fatalf("waiting for %s (%s): %v", what, cond, err)
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatal(b.ctx.Err())
		case <-time.After(50 * time.Millisecond): // a polling interval, not a wait for an event
		}
	}
}

func (b tab) signIn(email, password string) {
	b.t.Helper()
	b.open("/ui/signin")
	b.fill("#email", email)
	b.fill("#password", password)
	b.click(`[data-testid=signin-submit]`)
	b.waitText(`[data-testid=account-link]`, email, 20*time.Second)
}

func (b tab) shot(name string) { browsertest.Screenshot(b.t, b.ctx, name) }

// rowsWith is JavaScript counting the list rows whose Status cell reads status.
func rowsWith(region, status string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('[data-testid=%s] [data-testid="cell-Status"]')].filter(e => e.textContent.trim() === %q).length`, region, status)
}

func TestDashboard(t *testing.T) {
	requireNamespaces(t)
	l := newLAN(t, "node-a")
	bin, podBin, kbin := buildBinary(t), buildPodServer(t), kubectlPath(t)
	dataDir := t.TempDir()
	srv := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken, "WHEELHOUSE_BOOTSTRAP_PASSWORD=" + dashPassword},
		"--data-dir", dataDir, "--listen", net.JoinHostPort(l.hostIP, freePort(t, l.hostIP)))
	srv.waitReady(t)
	k := newKubectl(t, bin, kbin, srv.url, dataDir)
	call := func(token, method, path, body string, want int) []byte {
		t.Helper()
		code, b := platformCall(t, srv.url, token, method, path, body)
		if code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
		}
		return b
	}
	top := t
	br := browsertest.New(t)
	var watcher tab
	admin := tab{t: t, ctx: br.NewTab(t), base: srv.url}

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"sign in", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/")
			admin.waitText("h1", "Sign in", 10*time.Second)
			admin.fill("#email", "admin@localhost")
			admin.fill("#password", "wrong password")
			admin.click(`[data-testid=signin-submit]`)
			admin.waitText(`[data-testid=form-error]`, "Wrong email or password", 10*time.Second)
			admin.shot("signin-error")
			admin.signIn("admin@localhost", dashPassword)
			admin.waitText(`[data-testid=overview-region]`, "No nodes yet", 10*time.Second)
			admin.shot("overview-empty")
		}},
		{"add a node with the install one-liner", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/c/default/join")
			admin.fill("#j-desc", "dashboard e2e")
			admin.click(`[data-testid=join-submit]`)
			admin.waitText(`[data-testid=install-command]`, "install.sh", 10*time.Second)
			admin.click(`[data-testid=copy-install]`)
			admin.waitJS("the copy button to confirm", `document.querySelector('[data-testid=copy-install]').dataset.copied === 'true'`, 5*time.Second)
			cmd := evalIn[string](admin, `document.querySelector('[data-testid=install-command]').textContent`)
			m := regexp.MustCompile(`--token (\S+)`).FindStringSubmatch(cmd)
			if m == nil || !strings.Contains(cmd, srv.url+"/install.sh") {
				t.Fatalf("install command %q: want the server's install.sh and a token", cmd)
			}
			admin.shot("join")
			// The machine runs the agent with that token; the page shows the node without a reload.
			evalIn[any](admin, `window.__sameDocument = true`)
			agent := newAgent(top, bin, podBin, srv.url, l.nodes[0]) // it outlives this step
			agent.start(top, m[1])
			admin.waitJS("node-a Ready on the join page", rowsWith("join-nodes", "Ready")+" === 1", 60*time.Second)
			if !evalIn[bool](admin, `window.__sameDocument === true`) {
				t.Fatal("the page reloaded; the node should have appeared live")
			}
			admin.shot("join-node-ready")
		}},
		{"apply a Deployment from the YAML page", func(t *testing.T) {
			admin.t = t
			// A second tab watches the pods page from before the Deployment exists.
			watcher = tab{t: top, ctx: br.NewTab(top), base: srv.url}
			watcher.signIn("admin@localhost", dashPassword)
			watcher.open("/ui/c/default/r/pods?ns=default&label=app%3Dticker")
			watcher.waitText(`[data-testid=count]`, "0 pods", 10*time.Second)
			evalIn[any](watcher, `window.__sameDocument = true`)
			admin.open("/ui/c/default/apply")
			admin.fill(`[data-testid=apply-yaml]`, "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: bad}\nspec:\n  replicas: -1\n  selector: {matchLabels: {app: bad}}\n  template:\n    metadata: {labels: {app: bad}}\n    spec:\n      containers: [{name: c, image: x}]\n")
			admin.click(`[data-testid=apply-submit]`)
			admin.waitText(`[data-testid=field-error]`, "spec.replicas", 10*time.Second)
			admin.shot("apply-field-error")
			admin.fill(`[data-testid=apply-yaml]`, tickerManifest(podBin, "one", 2))
			admin.click(`[data-testid=apply-dryrun]`)
			admin.waitText(`[data-testid=apply-result]`, "dry run", 10*time.Second)
			if out := k.must("", "get", "deployments", "-o", "name"); strings.Contains(out, "ticker") {
				t.Fatalf("a dry run created the Deployment: %s", out)
			}
			admin.click(`[data-testid=apply-submit]`)
			admin.waitText(`[data-testid=apply-result-link]`, "open", 10*time.Second) // the dry run's page has no link
			admin.shot("apply-created")
		}},
		{"pods appear and go Running live", func(t *testing.T) {
			watcher.t = t
			watcher.waitJS("two ticker pods Running", rowsWith("list-region", "Running")+" === 2", 90*time.Second)
			if !evalIn[bool](watcher, `window.__sameDocument === true`) {
				t.Fatal("the pods page reloaded; pods should have gone Running live")
			}
			watcher.shot("pods-running")
		}},
		{"scale", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/c/default/r/deployments.apps/default/ticker")
			admin.fill(`[data-testid=scale-replicas]`, "3")
			admin.click(`[data-testid=action-scale]`)
			admin.waitText(`[data-testid=flash]`, "scaled to 3", 10*time.Second)
			admin.waitText(`[data-testid=ready-count]`, "3/3", 90*time.Second)
			admin.shot("deployment-scaled")
		}},
		{"follow a pod's logs", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/c/default/r/pods?ns=default&label=app%3Dticker")
			admin.waitJS("pod rows", `document.querySelectorAll('[data-testid=row-link]').length > 0`, 10*time.Second)
			// The row's link, followed as a user does; read rather than clicked, since the live region may be
			// re-rendered (its elements replaced) between finding the link and clicking it.
			href := evalIn[string](admin, `document.querySelector('[data-testid=row-link]').getAttribute('href')`)
			admin.open(href)
			admin.waitText(`[data-testid=object-title]`, "Pod ticker-", 10*time.Second)
			admin.click(`[data-testid=action-logs]`)
			admin.waitText(`[data-testid=logs]`, "tick 3", 30*time.Second)
			n := evalIn[int](admin, `document.querySelectorAll('#logs div').length`)
			admin.waitJS("more lines while following", fmt.Sprintf(`document.querySelectorAll('#logs div').length > %d`, n+3), 20*time.Second)
			admin.fill(`[data-testid=logs-search]`, "tick 2")
			evalIn[any](admin, `document.getElementById('log-search').dispatchEvent(new Event('input'))`)
			admin.waitJS("search hides other lines", `[...document.querySelectorAll('#logs div')].filter(d => !d.classList.contains('hidden')).every(d => d.textContent.includes('tick 2'))`, 5*time.Second)
			if href := evalIn[string](admin, `document.querySelector('[data-testid=logs-download]').getAttribute('href')`); !strings.Contains(href, "/download?container=tick") {
				t.Fatalf("download link %q", href)
			}
			admin.shot("logs")
		}},
		{"the Live switch", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/c/default/r/pods?ns=default&label=app%3Dticker")
			admin.waitJS("live updates on", `document.documentElement.dataset.live === 'on'`, 10*time.Second)
			// A hidden tab asks the server to pause its regions, and to resume them when it is shown again.
			evalIn[any](admin, `(() => {
				window.__sent = [];
				const send = WebSocket.prototype.send;
				WebSocket.prototype.send = function (m) { window.__sent.push(JSON.parse(m).t); return send.call(this, m); };
				let hidden = true;
				Object.defineProperty(document, 'hidden', {configurable: true, get: () => hidden});
				document.dispatchEvent(new Event('visibilitychange'));
				hidden = false;
				document.dispatchEvent(new Event('visibilitychange'));
			})()`)
			if sent := evalIn[[]string](admin, `window.__sent`); strings.Join(sent, ",") != "pause,resume" {
				t.Fatalf("messages on hiding and showing the tab: %v, want pause then resume", sent)
			}
			admin.click("#live-switch")
			admin.waitJS("live updates off (socket closed)", `document.documentElement.dataset.live === 'off'`, 5*time.Second)
			k.must("", "scale", "deployment", "ticker", "--replicas", "4")
			// Switched back on, the tab subscribes again and shows the cluster as it is now.
			admin.click("#live-switch")
			admin.waitJS("4 Running after switching back on", rowsWith("list-region", "Running")+" === 4", 90*time.Second)
			admin.open("/ui/c/default/r/pods?ns=default&label=app%3Dticker")
			if !evalIn[bool](admin, `document.getElementById('live-switch').checked`) {
				t.Fatal("the switch did not stay on")
			}
		}},
		{"roll back", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/c/default/apply")
			admin.fill(`[data-testid=apply-yaml]`, tickerManifest(podBin, "two", 3))
			admin.click(`[data-testid=apply-submit]`)
			// kubectl scale (the Live switch step) owns spec.replicas now: server-side apply says so, as kubectl
			// apply --server-side does, until the user takes the field over.
			admin.waitText(`[data-testid=apply-message]`, `conflict with "kubectl"`, 10*time.Second)
			admin.waitText(`[data-testid=field-error]`, "spec.replicas", 10*time.Second)
			admin.shot("apply-conflict")
			admin.click(`input[name=force]`)
			admin.click(`[data-testid=apply-submit]`)
			admin.waitText(`[data-testid=apply-result]`, "configured", 10*time.Second)
			admin.waitText(`[data-testid=apply-result-link]`, "open", 10*time.Second)
			admin.open("/ui/c/default/r/deployments.apps/default/ticker")
			admin.waitJS("two revisions", `document.querySelectorAll('[data-testid=revision]').length === 2`, 30*time.Second)
			admin.waitText(`[data-testid=rollout-status]`, "successfully rolled out", 90*time.Second)
			admin.shot("deployment-two-revisions")
			// Choose and submit in one script: a live re-render of the page (the rollout's status) between a choice
			// and a click would put the select back to its first revision (seen failing once).
			evalIn[bool](admin, `(() => { const f = document.querySelector('[data-testid=rollback-form]');
				f.querySelector('[data-testid=rollback-revision]').value = '1';
				f.requestSubmit(f.querySelector('[data-testid=action-rollback]')); return true; })()`)
			admin.waitText(`[data-testid=confirm-message]`, "revision 1", 10*time.Second)
			admin.shot("confirm-rollback")
			admin.click(`[data-testid=confirm]`)
			admin.waitText(`[data-testid=flash]`, "rolled back to revision 1", 10*time.Second)
			if v := k.must("", "get", "deployment", "ticker", "-o", "jsonpath={.spec.template.spec.containers[0].env[0].value}"); v != "one" {
				t.Fatalf("after the rollback VERSION is %q, want one", v)
			}
			admin.waitJS("revision 3 current", `!!document.querySelector('[data-testid=revision][data-revision="3"] .badge')`, 30*time.Second)
		}},
		{"invite a member", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/t/default/access")
			// The server's own check, with the browser's turned off.
			evalIn[any](admin, `document.querySelector('[data-testid=invite-form]').noValidate = true`)
			admin.fill(`[data-testid=invite-email]`, "not an email")
			admin.click(`[data-testid=invite-submit]`)
			admin.waitText(`[data-testid=form-error]`, "email", 10*time.Second)
			admin.fill(`[data-testid=invite-email]`, "carol@example.com")
			admin.click(`[data-testid=invite-submit]`)
			admin.waitText(`[data-testid=invite-url]`, "/ui/invitation?token=", 10*time.Second)
			admin.click(`[data-testid=copy-invite]`)
			admin.waitJS("copied", `document.querySelector('[data-testid=copy-invite]').dataset.copied === 'true'`, 5*time.Second)
			admin.shot("invitation")
			link := evalIn[string](admin, `document.querySelector('[data-testid=invite-url]').textContent.trim()`)
			carol := tab{t: t, ctx: br.NewTab(t), base: srv.url}
			if err := chromedp.Do(carol.ctx, chromedp.Navigate(link)); err != nil {
				t.Fatal(err)
			}
			carol.fill(`[data-testid=accept-password]`, "carols-password")
			carol.fill(`[data-testid=accept-confirm]`, "carols-password")
			carol.click(`[data-testid=accept-submit]`)
			carol.waitText("h1", "Sign in", 10*time.Second)
			carol.signIn("carol@example.com", "carols-password")
			carol.open("/ui/c/default/r/pods?ns=default")
			carol.waitJS("carol sees the pods", rowsWith("list-region", "Running")+" >= 3", 60*time.Second)
			// Removing her from the team removes what she sees, live.
			var members struct {
				Items []struct{ UserID, Email string }
			}
			if err := json.Unmarshal(call(e2eToken, "GET", "/teams/default/members", "", 200), &members); err != nil {
				t.Fatal(err)
			}
			for _, m := range members.Items {
				if m.Email == "carol@example.com" {
					call(e2eToken, "DELETE", "/teams/default/members/"+m.UserID, "", 204)
				}
			}
			k.must("", "delete", "pod", "-l", "app=ticker", "--wait=false") // an update for her open region
			carol.waitText(`[data-testid=region-gone]`, "no longer a member", 30*time.Second)
			carol.shot("member-removed")
		}},
		{"create and revoke an API token", func(t *testing.T) {
			admin.t = t
			admin.open("/ui/account")
			admin.fill(`[data-testid=token-name]`, "ci")
			admin.click(`[data-testid=token-submit]`)
			admin.waitText(`[data-testid=new-token]`, "whp_", 10*time.Second)
			tok := evalIn[string](admin, `document.querySelector('[data-testid=new-token]').textContent.trim()`)
			call(tok, "GET", "/me", "", 200)
			admin.shot("token-created")
			admin.open("/ui/account")
			admin.waitJS("the token listed", `!!document.querySelector('[data-testid=token][data-name=ci]')`, 10*time.Second)
			if evalIn[bool](admin, `document.body.textContent.includes(`+jsString(tok)+`)`) {
				t.Fatal("the token's secret is shown again after its creation")
			}
			admin.click(`[data-testid=token][data-name=ci] [data-testid=token-revoke]`)
			admin.waitText(`[data-testid=flash]`, "revoked", 10*time.Second)
			call(tok, "GET", "/me", "", 401)
		}},
		{"switch team and cluster", func(t *testing.T) {
			admin.t = t
			call(e2eToken, "POST", "/teams", `{"id":"green","name":"Green"}`, 201)
			call(e2eToken, "POST", "/teams/green/clusters", `{"id":"green1","name":"Green one"}`, 201)
			admin.open("/ui/c/default")
			evalIn[any](admin, `(() => { const s = document.querySelector('[data-testid=team-switcher]'); s.value = '/ui/t/green'; s.dispatchEvent(new Event('change')); })()`)
			admin.waitText(`[data-testid=clusters]`, "Green one", 10*time.Second)
			evalIn[any](admin, `(() => { const s = document.querySelector('[data-testid=cluster-switcher]'); s.value = '/ui/c/green1'; s.dispatchEvent(new Event('change')); })()`)
			admin.waitText("h1", "Green one", 10*time.Second)
			admin.waitText(`[data-testid=overview-region]`, "No nodes yet", 10*time.Second)
			admin.shot("switched-cluster")
		}},
		{"another team sees none of it", func(t *testing.T) {
			call(e2eToken, "POST", "/teams", `{"id":"blue","name":"Blue"}`, 201)
			call(e2eToken, "POST", "/teams/blue/clusters", `{"id":"blue1","name":"Blue one"}`, 201)
			var inv struct{ Token string }
			if err := json.Unmarshal(call(e2eToken, "POST", "/teams/blue/invitations", `{"email":"bob@example.com","role":"admin"}`, 201), &inv); err != nil {
				t.Fatal(err)
			}
			call("", "POST", "/invitations/accept", `{"token":"`+inv.Token+`","password":"bobs-password"}`, 201)
			// The admin is in Blue too (they made it); Bob must never see Default.
			bob := tab{t: t, ctx: br.NewTab(t), base: srv.url}
			bob.signIn("bob@example.com", "bobs-password")
			bob.waitText("h1", "Blue one", 10*time.Second)
			if evalIn[bool](bob, `[...document.querySelectorAll('[data-testid=team-switcher] option, [data-testid=cluster-switcher] option')].some(o => /default|Green/i.test(o.textContent))`) {
				t.Fatal("Bob's switchers list another team")
			}
			for _, p := range []string{"/ui/c/default", "/ui/c/default/r/pods", "/ui/c/default/r/pods/default/x", "/ui/t/default/access", "/ui/c/default/apply"} {
				bob.open(p)
				bob.waitText(`[data-testid=error-title]`, "Not found", 10*time.Second)
			}
			bob.shot("other-team-not-found")
			// A live subscription to Default's pods, sent by hand over Bob's socket, is refused.
			reason := evalIn[string](bob, `new Promise(resolve => {
				const ws = new WebSocket('wss://' + location.host + '/ui/live');
				ws.onopen = () => ws.send(JSON.stringify({t: 'sub', id: 'x', region: 'list', params: 'cluster=default&resource=pods'}));
				ws.onmessage = ev => { const m = JSON.parse(ev.data); if (m.id === 'x') { resolve(m.t + ': ' + (m.reason || m.html)); ws.close(); } };
			})`)
			if !strings.HasPrefix(reason, "gone: ") {
				t.Fatalf("Bob's subscription to another team's pods answered %q", reason)
			}
			bob.open("/ui/c/blue1/r/pods")
			bob.waitText(`[data-testid=count]`, "0 pods", 10*time.Second)
			// Pods change in Default while Bob watches Blue's pods: nothing of them reaches him, live or on reload.
			k.must(tickerManifest(podBin, "one", 4), "apply", "-f", "-")
			admin.t = t
			admin.open("/ui/c/default/r/pods?ns=default&label=app%3Dticker")
			admin.waitJS("4 ticker pods Running", rowsWith("list-region", "Running")+" === 4", 90*time.Second)
			if evalIn[bool](bob, `document.body.textContent.includes('ticker')`) {
				t.Fatal("a live update showed Bob another team's pod")
			}
			bob.open("/ui/c/blue1/r/pods")
			bob.waitText(`[data-testid=count]`, "0 pods", 10*time.Second)
			if evalIn[bool](bob, `document.body.textContent.includes('ticker')`) {
				t.Fatal("Bob's reloaded page shows another team's pod")
			}
		}},
		{"every page renders", func(t *testing.T) {
			admin.t = t
			pod := strings.TrimPrefix(k.must("", "get", "pods", "-l", "app=ticker", "-o", "name"), "pod/")
			pod = strings.Fields(pod)[0]
			pages := []struct{ name, path string }{
				{"overview", "/ui/c/default"}, {"nodes", "/ui/c/default/r/nodes"}, {"node", "/ui/c/default/r/nodes/-/node-a"},
				{"namespaces", "/ui/c/default/r/namespaces"}, {"events", "/ui/c/default/r/events?ns=default"},
				{"pods", "/ui/c/default/r/pods"}, {"pod", "/ui/c/default/r/pods/default/" + pod},
				{"pod-yaml", "/ui/c/default/r/pods/default/" + pod + "/yaml"},
				{"deployments", "/ui/c/default/r/deployments.apps"}, {"replicasets", "/ui/c/default/r/replicasets.apps"},
				{"statefulsets", "/ui/c/default/r/statefulsets.apps"}, {"daemonsets", "/ui/c/default/r/daemonsets.apps"},
				{"jobs", "/ui/c/default/r/jobs.batch"}, {"cronjobs", "/ui/c/default/r/cronjobs.batch"},
				{"services", "/ui/c/default/r/services"}, {"service", "/ui/c/default/r/services/default/kubernetes"},
				{"endpointslices", "/ui/c/default/r/endpointslices.discovery.k8s.io"},
				{"configmaps", "/ui/c/default/r/configmaps"}, {"secrets", "/ui/c/default/r/secrets"},
				{"serviceaccounts", "/ui/c/default/r/serviceaccounts"},
				{"clusterroles", "/ui/c/default/r/clusterroles.rbac.authorization.k8s.io"},
				{"clusterrolebindings", "/ui/c/default/r/clusterrolebindings.rbac.authorization.k8s.io"},
				{"clusterrole", "/ui/c/default/r/clusterroles.rbac.authorization.k8s.io/-/view"},
				{"apply", "/ui/c/default/apply"}, {"join", "/ui/c/default/join"},
				{"team", "/ui/t/default"}, {"members", "/ui/t/default/access"}, {"audit", "/ui/t/default/audit"},
				{"account", "/ui/account"},
			}
			for _, p := range pages {
				admin.open(p.path)
				admin.waitJS(p.name+" rendered", `document.readyState === 'complete' && !!document.querySelector('main h1')`, 10*time.Second)
				if evalIn[bool](admin, `!!document.querySelector('[data-testid=error-title], [data-testid=region-gone]')`) {
					admin.shot("failed-" + p.name)
					t.Errorf("%s (%s) shows an error", p.name, p.path)
				}
				admin.shot("page-" + p.name)
			}
		}},
		{"pages at phone width", func(t *testing.T) {
			admin.t = t
			if err := browsertest.SetViewport(admin.ctx, browsertest.Phone); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = browsertest.SetViewport(admin.ctx, browsertest.Desktop) }()
			for name, p := range map[string]string{"phone-overview": "/ui/c/default", "phone-pods": "/ui/c/default/r/pods?ns=default",
				"phone-node": "/ui/c/default/r/nodes/-/node-a"} {
				admin.open(p)
				admin.waitJS("page rendered", `document.readyState === 'complete'`, 10*time.Second)
				if w := evalIn[int](admin, `document.documentElement.scrollWidth`); w > 400 {
					t.Errorf("%s is %d px wide at a 390 px viewport: it scrolls sideways", p, w)
				}
				admin.shot(name)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			return // later steps build on earlier ones
		}
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
