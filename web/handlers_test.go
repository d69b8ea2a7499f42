package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/server/platform"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/web:1"}}}}
}

func TestSignIn(t *testing.T) {
	e := newEnv(t)
	b := e.browser()

	resp := b.get("/ui/c/c1/r/pods")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin?next=") {
		t.Fatalf("a page without a session: %d %q, want a redirect to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := b.post("/ui/c/c1/apply", url.Values{"yaml": {"kind: Namespace"}}, false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a form without a session: %d, want 401", resp.StatusCode)
	}

	doc := parsePage(t, b.post("/ui/signin", url.Values{"email": {"owner@t1.example"}, "password": {"wrong"}}, false), http.StatusUnauthorized)
	if got := testid(doc, "form-error").Text(); !strings.Contains(got, "Wrong email or password") {
		t.Fatalf("wrong password: form error %q", got)
	}
	if got, _ := doc.Find("#email").Attr("value"); got != "owner@t1.example" {
		t.Fatalf("the form lost the email: %q", got)
	}

	resp = b.post("/ui/signin", url.Values{"email": {"owner@t1.example"}, "password": {testPassword}, "next": {"//evil.example/x"}}, false)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign in with an off-site next: %d %q, want a redirect to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == platform.SessionCookie {
			session = c
		}
	}
	if session == nil || !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Path != "/" || session.Domain != "" {
		t.Fatalf("session cookie %+v: want __Host- with Secure, HttpOnly, SameSite=Lax, Path=/ and no Domain", session)
	}
	resp = b.get("/ui/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/c/c1" {
		t.Fatalf("home: %d %q, want the first cluster", resp.StatusCode, resp.Header.Get("Location"))
	}
	for k, want := range map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q: want scripts from this origin only", csp)
	}

	// Signing out ends the session on the server: the old cookie no longer works.
	b.csrf = csrfOf(t, b.page("/ui/account", http.StatusOK))
	if resp := b.post("/ui/signout", nil, true); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	replay := e.browser()
	replay.c.Jar.SetCookies(mustURL(t, e.srv.URL), []*http.Cookie{{Name: platform.SessionCookie, Value: session.Value}})
	if resp := replay.get("/ui/c/c1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the signed-out session still opens pages: %d", resp.StatusCode)
	}
}

func csrfOf(t *testing.T, doc *goquery.Document) string {
	t.Helper()
	v, _ := doc.Find(`input[name=_csrf]`).First().Attr("value")
	return v
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestStateChangesNeedCSRFAndOrigin(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn("owner@t1.example")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	if _, err := e.admin("c1").CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	del := "/ui/c/c1/r/namespaces/-/doomed/do/delete"
	if resp := b.post(del, nil, false); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a delete without the CSRF token: %d, want 403", resp.StatusCode)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+del, strings.NewReader(url.Values{csrfField: {b.csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if resp := b.do(req); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a delete from another origin: %d, want 403", resp.StatusCode)
	}
	if _, err := e.admin("c1").CoreV1().Namespaces().Get(t.Context(), "doomed", metav1.GetOptions{}); err != nil {
		t.Fatalf("a refused request changed something: %v", err)
	}
	if resp := b.post(del, nil, true); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "done=") {
		t.Fatalf("the delete with its token: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	got, err := e.admin("c1").CoreV1().Namespaces().Get(t.Context(), "doomed", metav1.GetOptions{})
	if err == nil && got.DeletionTimestamp == nil {
		t.Fatal("the namespace was not deleted")
	}
}

func TestAnotherTeamsClusterIsNotFound(t *testing.T) {
	e := newEnv(t)
	if _, err := e.admin("c2").CoreV1().Pods("default").Create(t.Context(), pod("default", "secret-plans"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn("owner@t1.example")
	for _, p := range []string{"/ui/c/c2", "/ui/c/c2/r/pods", "/ui/c/c2/r/pods/default/secret-plans",
		"/ui/c/c2/r/pods/default/secret-plans/yaml", "/ui/c/c2/logs/default/secret-plans", "/ui/c/c2/apply", "/ui/c/c2/join",
		"/ui/t/t2", "/ui/t/t2/access", "/ui/t/t2/audit", "/ui/c/nope", "/ui/c/NOT_AN_ID"} {
		doc := b.page(p, http.StatusNotFound)
		if strings.Contains(doc.Text(), "secret-plans") || strings.Contains(doc.Text(), "Cluster c2") {
			t.Errorf("%s shows another team's data", p)
		}
	}
	if resp := b.post("/ui/c/c2/r/pods/default/secret-plans/do/delete", nil, true); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("deleting another team's pod: %d, want 404", resp.StatusCode)
	}
	if _, err := e.admin("c2").CoreV1().Pods("default").Get(t.Context(), "secret-plans", metav1.GetOptions{}); err != nil {
		t.Fatalf("another team's pod: %v", err)
	}
	// Their own cluster lists their pods only.
	if _, err := e.admin("c1").CoreV1().Pods("default").Create(t.Context(), pod("default", "ours"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	doc := b.page("/ui/c/c1/r/pods?ns=default", http.StatusOK)
	if got := testid(doc, "row").Length(); got != 1 || testid(doc, "row").AttrOr("data-name", "") != "ours" {
		t.Fatalf("c1's pods page: %d rows (%s)", got, testid(doc, "list-table").Text())
	}
	if opts := testid(doc, "cluster-switcher").Find("option").Text(); strings.Contains(opts, "c2") {
		t.Fatalf("the cluster switcher offers another team's cluster: %q", opts)
	}
}

func TestViewerCannotChangeThings(t *testing.T) {
	e := newEnv(t)
	if _, err := e.admin("c1").CoreV1().Pods("default").Create(t.Context(), pod("default", "web-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn("viewer@t1.example")
	doc := b.page("/ui/c/c1/r/pods/default/web-1", http.StatusOK)
	if testid(doc, "action-delete").Length() != 0 {
		t.Fatal("a viewer is offered Delete")
	}
	resp := b.post("/ui/c/c1/r/pods/default/web-1/do/delete", nil, true)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "error=") || !strings.Contains(loc, "forbidden") {
		t.Fatalf("a viewer's delete: %d %q, want back to the pod with the API's refusal", resp.StatusCode, loc)
	}
	if _, err := e.admin("c1").CoreV1().Pods("default").Get(t.Context(), "web-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("the refused delete deleted: %v", err)
	}
	// Secrets are not in the view role: the page says so instead of listing them.
	doc = b.page("/ui/c/c1/r/secrets", http.StatusForbidden)
	if got := testid(doc, "region-gone").Text(); !strings.Contains(got, "does not allow you to list secrets") {
		t.Fatalf("a viewer's secrets page: %q", got)
	}
	// Team settings a viewer may not change are refused by the platform API and shown.
	b.csrf = csrfOf(t, b.page("/ui/t/t1/access", http.StatusOK))
	doc = parsePage(t, b.post("/ui/t/t1/invitations", url.Values{"email": {"x@example.com"}, "role": {"member"}}, true), http.StatusForbidden)
	if !strings.Contains(testid(doc, "flash-error").Text(), "may not") {
		t.Fatalf("a viewer's invitation: %q", testid(doc, "flash-error").Text())
	}
}

func TestSecretRevealIsAudited(t *testing.T) {
	e := newEnv(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, Data: map[string][]byte{"password": []byte("hunter2-value")}}
	if _, err := e.admin("c1").CoreV1().Secrets("default").Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn("owner@t1.example")
	doc := b.page("/ui/c/c1/r/secrets/default/db", http.StatusOK)
	if strings.Contains(doc.Text(), "hunter2") {
		t.Fatal("the secret's page shows its value before a reveal")
	}
	if testid(doc, "secret-key").AttrOr("data-key", "") != "password" {
		t.Fatal("the secret's keys are not listed")
	}
	b.page("/ui/c/c1/r/secrets/default/db/confirm/reveal?key=password", http.StatusOK)
	doc = parsePage(t, b.post("/ui/c/c1/r/secrets/default/db/do/reveal", url.Values{"key": {"password"}}, true), http.StatusOK)
	if got := testid(doc, "secret-value").Text(); got != "hunter2-value" {
		t.Fatalf("revealed %q", got)
	}
	evs, err := e.ten.AuditLog(t.Context(), tenancy.AuditQuery{TeamID: "t1", Action: "reveal secret"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Actor != "owner@t1.example" || !strings.Contains(evs[0].Resource, "secrets/default/db key password") || evs[0].Result != "200" {
		t.Fatalf("audit log after a reveal: %+v", evs)
	}
	// The team's audit page shows it, filtered by action.
	doc = b.page("/ui/t/t1/audit?action=reveal+secret", http.StatusOK)
	if rows := testid(doc, "audit-entry"); rows.Length() != 1 || !strings.Contains(rows.Text(), "secrets/default/db key password") {
		t.Fatalf("audit page filtered by action: %d rows: %q", rows.Length(), rows.Text())
	}
}

func TestApplyYAML(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn("owner@t1.example")
	b.page("/ui/c/c1/apply", http.StatusOK)
	good := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n"
	bad := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: -2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: x}]\n"
	doc := parsePage(t, b.post("/ui/c/c1/apply", url.Values{"yaml": {"# two documents\n" + good + "---\n" + bad}, "dryRun": {"1"}}, true),
		http.StatusUnprocessableEntity)
	results := testid(doc, "apply-result")
	if results.Length() != 2 || results.First().AttrOr("data-ok", "") != "true" || results.Last().AttrOr("data-ok", "") != "false" {
		t.Fatalf("dry run results: %s", testid(doc, "apply-results").Text())
	}
	if !strings.Contains(results.First().Text(), "dry run") {
		t.Fatalf("the dry run's result does not say so: %q", results.First().Text())
	}
	ferr := testid(doc, "field-error")
	if ferr.Length() != 1 || !strings.Contains(ferr.Text(), "spec.replicas") {
		t.Fatalf("field errors: %q", ferr.Text())
	}
	// The error sits under the line of its field.
	if prev := ferr.Prev().Text(); !strings.Contains(prev, "replicas: -2") {
		t.Fatalf("the field error is not next to its line: %q", prev)
	}
	if _, err := e.admin("c1").CoreV1().ConfigMaps("default").Get(t.Context(), "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the ConfigMap: %v", err)
	}
	doc = parsePage(t, b.post("/ui/c/c1/apply", url.Values{"yaml": {good}}, true), http.StatusOK)
	if got := testid(doc, "apply-result").Text(); !strings.Contains(got, "created") {
		t.Fatalf("apply: %q", got)
	}
	cm, err := e.admin("c1").CoreV1().ConfigMaps("default").Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil || cm.Data["mode"] != "fast" {
		t.Fatalf("applied ConfigMap: %v %v", cm, err)
	}
	if mf := cm.ManagedFields; len(mf) == 0 || mf[0].Manager != fieldManager {
		t.Fatalf("managed fields %+v: want the dashboard's field manager", mf)
	}
	doc = parsePage(t, b.post("/ui/c/c1/apply", url.Values{"yaml": {"kind: [unclosed"}}, true), http.StatusBadRequest)
	if !strings.Contains(testid(doc, "apply-error").Text(), "document 1") {
		t.Fatalf("invalid YAML: %q", testid(doc, "apply-error").Text())
	}
	// The edit page shows the object as the API serves it, without managed fields; saving a stale copy is refused.
	doc = b.page("/ui/c/c1/r/configmaps/default/settings/yaml", http.StatusOK)
	text := testid(doc, "apply-yaml").Text()
	if !strings.Contains(text, "mode: fast") || strings.Contains(text, "managedFields") {
		t.Fatalf("edit page YAML:\n%s", text)
	}
	cm.Data["mode"] = "slow"
	if _, err := e.admin("c1").CoreV1().ConfigMaps("default").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	doc = parsePage(t, b.post("/ui/c/c1/apply", url.Values{"yaml": {strings.Replace(text, "fast", "faster", 1)}, "edit": {"1"}}, true),
		http.StatusUnprocessableEntity)
	if got := testid(doc, "apply-message").Text(); !strings.Contains(got, "modified") {
		t.Fatalf("saving a stale copy: %q, want the API's conflict", got)
	}
}

// liveClient is a websocket client of /ui/live with a browser's session cookie.
type liveClient struct {
	t  *testing.T
	ws *websocket.Conn
}

type liveMsg struct {
	T, ID, HTML, Reason string
	Seq                 uint64
}

func (b *browser) live(origin string) (*liveClient, *http.Response, error) {
	u := strings.Replace(b.e.srv.URL, "https://", "wss://", 1) + "/ui/live"
	d := websocket.Dialer{TLSClientConfig: b.e.srv.Client().Transport.(*http.Transport).TLSClientConfig,
		EnableCompression: true} // as browsers do
	h := http.Header{}
	// The jar keeps Secure cookies for https URLs; a browser sends them on wss too.
	for _, c := range b.c.Jar.Cookies(mustURL(b.e.t, b.e.srv.URL)) {
		h.Add("Cookie", c.Name+"="+c.Value)
	}
	if origin != "" {
		h.Set("Origin", origin)
	}
	ws, resp, err := d.DialContext(b.e.t.Context(), u, h)
	if err != nil {
		return nil, resp, err
	}
	b.e.t.Cleanup(func() { ws.Close() })
	return &liveClient{t: b.e.t, ws: ws}, resp, nil
}

func (l *liveClient) send(m map[string]string) {
	l.t.Helper()
	if err := l.ws.WriteJSON(m); err != nil {
		l.t.Fatal(err)
	}
}

// next reads messages until one satisfies ok (within 20 s).
func (l *liveClient) next(what string, ok func(liveMsg) bool) liveMsg {
	l.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_ = l.ws.SetReadDeadline(deadline)
		var raw map[string]any
		if err := l.ws.ReadJSON(&raw); err != nil {
			l.t.Fatalf("waiting for %s: %v", what, err)
		}
		b, _ := json.Marshal(raw)
		var m liveMsg
		_ = json.Unmarshal(b, &m)
		if ok(m) {
			return m
		}
	}
}

func TestLiveUpdates(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn("owner@t1.example")

	if _, resp, err := b.live("https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a websocket from another origin: %v (%v), want 403", err, resp)
	}
	if _, resp, err := e.browser().live(e.srv.URL); err == nil || resp == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		t.Fatalf("a websocket without a session: %v, want refused", err)
	}

	l, resp, err := b.live(e.srv.URL)
	if err != nil {
		t.Fatalf("%v: %+v", err, resp)
	}
	l.send(map[string]string{"t": "sub", "id": "other", "region": "list", "params": "cluster=c2&resource=pods"})
	if m := l.next("another team's region refused", func(m liveMsg) bool { return m.ID == "other" }); m.T != "gone" {
		t.Fatalf("subscribing to another team's pods: %+v, want gone", m)
	}
	l.send(map[string]string{"t": "sub", "id": "pods", "region": "list", "params": "cluster=c1&resource=pods&ns=default"})
	l.next("the first render", func(m liveMsg) bool { return m.ID == "pods" && m.T == "frag" && strings.Contains(m.HTML, "No pods") })
	if _, err := e.admin("c1").CoreV1().Pods("default").Create(t.Context(), pod("default", "fresh"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := l.next("the new pod pushed", func(m liveMsg) bool { return m.ID == "pods" && strings.Contains(m.HTML, `data-name="fresh"`) })
	if m.T != "frag" || m.Seq < 2 {
		t.Fatalf("push: %+v", m)
	}
	// A burst of changes is coalesced: far fewer fragments than changes, and the last one has them all.
	cs := e.admin("c1")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range 100 {
		p := pod("default", "burst-"+strconv.Itoa(i))
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	frags := 0
	l.next("all 101 pods", func(m liveMsg) bool {
		frags++
		return m.ID == "pods" && strings.Contains(m.HTML, `data-total="101"`)
	})
	if frags >= 100 {
		t.Fatalf("%d fragments for 100 changes: not coalesced", frags)
	}

	// Revoking the role that let the user list pods removes the region at once.
	crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "wheelhouse:team:owner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m = l.next("the region gone after the revocation", func(m liveMsg) bool { return m.ID == "pods" && m.T == "gone" })
	if !strings.Contains(m.Reason, "does not allow you to list pods") {
		t.Fatalf("gone reason %q", m.Reason)
	}
}

func TestLiveEndsWithTheMembership(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn("viewer@t1.example")
	l, _, err := b.live(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	l.send(map[string]string{"t": "sub", "id": "o", "region": "overview", "params": "cluster=c1"})
	l.next("the overview", func(m liveMsg) bool { return m.ID == "o" && m.T == "frag" })
	if err := e.ten.RemoveMember(t.Context(), "t1", e.users["viewer@t1.example"].ID); err != nil {
		t.Fatal(err)
	}
	m := l.next("bye", func(m liveMsg) bool { return m.T == "bye" || m.T == "gone" })
	if !strings.Contains(m.Reason, "no longer a member") {
		t.Fatalf("after the removal: %+v", m)
	}
}

func TestCordonKubeconfigAndPassword(t *testing.T) {
	e := newEnv(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if _, err := e.admin("c1").CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn("owner@t1.example")
	doc := b.page("/ui/c/c1/r/nodes/-/n1", http.StatusOK)
	if testid(doc, "action-cordon").Length() != 1 {
		t.Fatal("no Cordon on a schedulable node")
	}
	if resp := b.post("/ui/c/c1/r/nodes/-/n1/do/cordon", nil, true); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cordon: %d", resp.StatusCode)
	}
	got, err := e.admin("c1").CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	if err != nil || !got.Spec.Unschedulable {
		t.Fatalf("after cordon: %v %v", got.Spec.Unschedulable, err)
	}
	// The page reads the watch cache, which may be a moment behind the write.
	apitest.Eventually(t, "a cordoned node's page says so and offers Uncordon", func() bool {
		doc = b.page("/ui/c/c1/r/nodes/-/n1", http.StatusOK)
		return testid(doc, "cordoned").Length() == 1 && testid(doc, "action-uncordon").Length() == 1
	})

	resp := b.post("/ui/c/c1/kubeconfig", nil, true)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), "kubeconfig-c1.yaml") ||
		!strings.Contains(body, "/clusters/c1") || !strings.Contains(body, "token: whp_") {
		t.Fatalf("kubeconfig download: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Disposition"), body)
	}

	doc = parsePage(t, b.post("/ui/account/password", url.Values{"current": {"wrong"}, "new": {"new password 1"}}, true), http.StatusUnprocessableEntity)
	if !strings.Contains(testid(doc, "field-error-current").Text(), "not your current password") {
		t.Fatalf("wrong current password: %q", doc.Find(".fielderr").Text())
	}
	resp = b.post("/ui/account/password", url.Values{"current": {testPassword}, "new": {"new password 1"}}, true)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin") {
		t.Fatalf("password change: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := b.get("/ui/c/c1"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the session survived the password change: %d", resp.StatusCode)
	}
	if resp := e.browser().post("/ui/signin", url.Values{"email": {"owner@t1.example"}, "password": {"new password 1"}}, false); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in with the new password: %d", resp.StatusCode)
	}
}

func TestEventsFilteredByField(t *testing.T) {
	e := newEnv(t)
	for _, ev := range []struct{ name, typ string }{{"a", corev1.EventTypeNormal}, {"b", corev1.EventTypeWarning}} {
		_, err := e.admin("c1").CoreV1().Events("default").Create(t.Context(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: ev.name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}, Type: ev.typ,
			Reason: "Test", Message: "event " + ev.name}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	b := e.signedIn("owner@t1.example")
	doc := b.page("/ui/c/c1/r/events?ns=default&field=type%3DWarning", http.StatusOK)
	if rows := testid(doc, "row"); rows.Length() != 1 || rows.AttrOr("data-name", "") != "b" {
		t.Fatalf("warnings only: %d rows", rows.Length())
	}
	doc = b.page("/ui/c/c1/r/events?ns=default&field=nonsense", http.StatusOK)
	if testid(doc, "filter-error").Length() != 1 {
		t.Fatal("a bad field selector is not reported")
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var sb strings.Builder
	if _, err := io.Copy(&sb, resp.Body); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func TestLiveFollowsATeamRoleChange(t *testing.T) {
	e := newEnv(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s1"}}
	if _, err := e.admin("c1").CoreV1().Secrets("default").Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ten.SetRole(t.Context(), "t1", e.users["viewer@t1.example"].ID, tenancy.RoleMember); err != nil {
		t.Fatal(err)
	}
	b := e.signedIn("viewer@t1.example")
	l, _, err := b.live(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	l.send(map[string]string{"t": "sub", "id": "s", "region": "list", "params": "cluster=c1&resource=secrets&ns=default"})
	l.next("the secrets a member may list", func(m liveMsg) bool { return m.ID == "s" && strings.Contains(m.HTML, `data-name="s1"`) })
	// Made a viewer (no secrets in the view role) while nothing in the cluster changes: the region goes.
	if err := e.ten.SetRole(t.Context(), "t1", e.users["viewer@t1.example"].ID, tenancy.RoleViewer); err != nil {
		t.Fatal(err)
	}
	m := l.next("the region gone after the role change", func(m liveMsg) bool { return m.ID == "s" && m.T == "gone" })
	if !strings.Contains(m.Reason, "list secrets") {
		t.Fatalf("gone reason %q", m.Reason)
	}
}

func TestSharedRenderIsNotShownToOtherPermissions(t *testing.T) {
	e := newEnv(t)
	if _, err := e.admin("c1").CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-secret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner, err := e.signedIn("owner@t1.example").liveOK()
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := e.signedIn("viewer@t1.example").liveOK()
	if err != nil {
		t.Fatal(err)
	}
	sub := map[string]string{"t": "sub", "id": "o", "region": "overview", "params": "cluster=c1"}
	owner.send(sub)
	owner.next("the owner's overview", func(m liveMsg) bool { return m.ID == "o" && strings.Contains(m.HTML, "n-secret") })
	viewer.send(sub) // the same region at once: the owner's render is fresh, but not for a viewer
	m := viewer.next("the viewer's overview", func(m liveMsg) bool { return m.ID == "o" && m.T == "frag" })
	if strings.Contains(m.HTML, "n-secret") || !strings.Contains(m.HTML, "does not allow you to list nodes") {
		t.Fatalf("the viewer's overview:\n%s", m.HTML)
	}
}

func (b *browser) liveOK() (*liveClient, error) {
	l, _, err := b.live(b.e.srv.URL)
	return l, err
}

func TestTabsShowingTheSameRegionShareItsFrames(t *testing.T) {
	e := newEnv(t)
	var tabs []*liveClient
	for range 3 {
		l, err := e.signedIn("owner@t1.example").liveOK()
		if err != nil {
			t.Fatal(err)
		}
		l.send(map[string]string{"t": "sub", "id": "r0", "region": "list", "params": "cluster=c1&resource=pods&ns=default"})
		l.next("the first render", func(m liveMsg) bool { return m.ID == "r0" && m.T == "frag" })
		tabs = append(tabs, l)
	}
	if _, err := e.admin("c1").CoreV1().Pods("default").Create(t.Context(), pod("default", "shared"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, l := range tabs {
		m := l.next("the new pod", func(m liveMsg) bool { return m.ID == "r0" && strings.Contains(m.HTML, `data-name="shared"`) })
		seqs = append(seqs, m.Seq)
	}
	// The collection also advances once a second without a change (progress), which starts a new shared render:
	// the three tabs' renders, moments apart, straddle at most one such advance, so two at least share one.
	if seqs[0] != seqs[1] && seqs[1] != seqs[2] && seqs[0] != seqs[2] {
		t.Fatalf("seqs %v: no two tabs were sent one shared render", seqs)
	}
}

func TestRBACBindingsFromTheDashboard(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn("owner@t1.example")
	b.page("/ui/c/c1/apply", http.StatusOK)
	rb := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: ops-view, namespace: default}\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n" +
		"subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: ops@example.com}]\n"
	doc := parsePage(t, b.post("/ui/c/c1/apply", url.Values{"yaml": {rb}}, true), http.StatusOK)
	if !strings.Contains(testid(doc, "apply-result").Text(), "created") {
		t.Fatalf("create a RoleBinding: %q", testid(doc, "apply-result").Text())
	}
	doc = b.page("/ui/c/c1/r/rolebindings.rbac.authorization.k8s.io?ns=default", http.StatusOK)
	row := doc.Find(`[data-testid=row][data-name="ops-view"]`)
	if row.Length() != 1 || !strings.Contains(row.Text(), "ClusterRole/view") {
		t.Fatalf("RoleBindings page: %q", testid(doc, "list-table").Text())
	}
	b.page("/ui/c/c1/r/rolebindings.rbac.authorization.k8s.io/default/ops-view/confirm/delete", http.StatusOK)
	if resp := b.post("/ui/c/c1/r/rolebindings.rbac.authorization.k8s.io/default/ops-view/do/delete", nil, true); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if _, err := e.admin("c1").RbacV1().RoleBindings("default").Get(t.Context(), "ops-view", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the delete: %v", err)
	}
}

func TestAcceptInvitationAsTheSignedInUser(t *testing.T) {
	e := newEnv(t)
	tok, _, err := e.ten.CreateInvitation(t.Context(), "t1", "owner@t2.example", tenancy.RoleMember, e.users["owner@t1.example"].ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b := e.signedIn("owner@t2.example")
	doc := b.page("/ui/invitation?token="+url.QueryEscape(tok), http.StatusOK)
	if !strings.Contains(testid(doc, "accept-me").Text(), "owner@t2.example") {
		t.Fatalf("invitation page: %q", doc.Find("main").Text())
	}
	if resp := b.post("/ui/invitation", url.Values{"token": {tok}, "as": {"me"}}, false); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("accepting without the CSRF token: %d, want 403", resp.StatusCode)
	}
	if resp := b.post("/ui/invitation", url.Values{"token": {tok}, "as": {"me"}}, true); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("accept: %d", resp.StatusCode)
	}
	role, err := e.ten.MemberRole(t.Context(), "t1", e.users["owner@t2.example"].ID)
	if err != nil || role != tenancy.RoleMember {
		t.Fatalf("role in t1 after accepting: %q %v", role, err)
	}
}
