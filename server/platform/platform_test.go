package platform

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type contextT = context.Context

var zeroTime time.Time

// testCA is a CA certificate (PEM) for kubeconfigs and join-token pins.
var testCA = func() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}()

// env is the platform API on a real tenancy store and a real Kubernetes API (for cluster objects), over HTTP.
type env struct {
	t     *testing.T
	url   string
	ten   *tenancy.Store
	st    *store.Store
	admin string // the bootstrap admin's token (owner of team default)
}

// newEnv starts the API on a fresh database; opts adjust the tenancy Store's Config.
func newEnv(t *testing.T, opts ...func(*tenancy.Config)) *env {
	t.Helper()
	url := pgtest.NewDatabase(t)
	tcfg := tenancy.Config{URL: url, Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&tcfg)
	}
	ten, err := tenancy.Open(t.Context(), tcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ten.Close)
	res, err := ten.Bootstrap(t.Context(), tenancy.BootstrapConfig{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), store.Config{URL: url, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	kapi, err := kubeapi.New(kubeapi.Config{Storage: st, Registry: resources.Default(), Clusters: clusterSource{ten},
		Authenticator: tokenAuth{}, Authorizer: denyAll{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kapi.Close)
	policy, err := rbac.NewPlatform()
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{Tenancy: ten, Policy: policy, Clusters: kapi, CA: testCA, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	api.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL + Prefix, ten: ten, st: st, admin: res.Token}
}

// The Kubernetes API is used here only for EnsureCluster and DeleteClusterObjects.
type clusterSource struct{ ten *tenancy.Store }

func (c clusterSource) Cluster(ctx contextT, id string) (kubeapi.Cluster, error) {
	cl, err := c.ten.Cluster(ctx, id)
	if err != nil {
		return kubeapi.Cluster{}, kubeapi.ErrClusterNotFound
	}
	return kubeapi.Cluster{ID: cl.ID, ServiceCIDR: cl.ServiceCIDR.String()}, nil
}

type tokenAuth struct{}

func (tokenAuth) AuthenticateToken(_ contextT, _, _ string) (kubeapi.User, error) {
	return kubeapi.User{}, kubeapi.ErrUnauthenticated
}

type denyAll struct{}

func (denyAll) Authorize(_ contextT, _ kubeapi.Attributes) (bool, string, error) {
	return false, "", nil
}

// response is an answer read whole.
type response struct {
	code int
	ct   string
	body []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not JSON (%v): %s", r.code, err, r.body)
	}
}

// problem checks that the answer is a problem with the code and returns it.
func (r response) problem(t *testing.T, code int) Problem {
	t.Helper()
	var p Problem
	if r.ct != "application/problem+json" {
		t.Fatalf("answer %d has content type %q, want application/problem+json: %s", r.code, r.ct, r.body)
	}
	r.json(t, &p)
	if r.code != code || p.Status != code || !strings.HasPrefix(p.Type, problemBase) || p.Title == "" {
		t.Fatalf("got %d %+v, want a %d problem", r.code, p, code)
	}
	return p
}

func (e *env) do(token, method, path, body string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{code: resp.StatusCode, ct: resp.Header.Get("Content-Type"), body: b}
}

// ok requests and wants the code, returning the answer.
func (e *env) ok(token, method, path, body string, code int) response {
	e.t.Helper()
	r := e.do(token, method, path, body)
	if r.code != code {
		e.t.Fatalf("%s %s: %d %s, want %d", method, path, r.code, r.body, code)
	}
	return r
}

// newMember invites email into team default with role and accepts as a new user; it returns a token of theirs.
func (e *env) newMember(email, role string) (userID, token string) {
	e.t.Helper()
	var inv struct{ Token string }
	e.ok(e.admin, "POST", "/teams/default/invitations", `{"email":"`+email+`","role":"`+role+`"}`, 201).json(e.t, &inv)
	var acc struct {
		User struct{ ID string }
	}
	e.ok("", "POST", "/invitations/accept", `{"token":"`+inv.Token+`","password":"correct horse battery"}`, 201).json(e.t, &acc)
	tok, _, err := e.ten.CreateToken(e.t.Context(), acc.User.ID, "test", zeroTime)
	if err != nil {
		e.t.Fatal(err)
	}
	return acc.User.ID, tok
}

func TestTeamsMembersAndRoles(t *testing.T) {
	e := newEnv(t)
	var me meView
	e.ok(e.admin, "GET", "/me", "", 200).json(t, &me)
	if me.Email != tenancy.AdminEmail || len(me.Teams) != 1 || me.Teams[0].Role != "owner" {
		t.Fatalf("/me = %+v", me)
	}
	viewerID, viewer := e.newMember("vic@example.com", "viewer")
	_, member := e.newMember("mia@example.com", "member")
	var members itemsOf[memberView]
	e.ok(viewer, "GET", "/teams/default/members", "", 200).json(t, &members)
	if len(members.Items) != 3 {
		t.Fatalf("members: %+v", members)
	}
	e.do(viewer, "PATCH", "/teams/default/members/"+viewerID, `{"role":"admin"}`).problem(t, 403)
	e.do(member, "POST", "/teams/default/invitations", `{"email":"x@example.com","role":"viewer"}`).problem(t, 403)
	e.ok(e.admin, "PATCH", "/teams/default/members/"+viewerID, `{"role":"admin"}`, 200)
	e.ok(viewer, "POST", "/teams/default/invitations", `{"email":"x@example.com","role":"viewer"}`, 201) // now an admin
	// The owner's role moves only by transfer; the owner cannot be removed.
	adminID := me.ID
	e.do(viewer, "PATCH", "/teams/default/members/"+adminID, `{"role":"viewer"}`).problem(t, 409)
	e.do(viewer, "DELETE", "/teams/default/members/"+adminID, "").problem(t, 409)
	e.do(viewer, "POST", "/teams/default/transfer", `{"userId":"`+viewerID+`"}`).problem(t, 403)
	e.ok(e.admin, "POST", "/teams/default/transfer", `{"userId":"`+viewerID+`"}`, 200).json(t, &members)
	roles := map[string]string{}
	for _, m := range members.Items {
		roles[m.Email] = m.Role
	}
	if roles["vic@example.com"] != "owner" || roles[tenancy.AdminEmail] != "admin" {
		t.Fatalf("after transfer: %v", roles)
	}
	// A member may leave.
	var mia string
	for _, m := range members.Items {
		if m.Email == "mia@example.com" {
			mia = m.UserID
		}
	}
	e.ok(member, "DELETE", "/teams/default/members/"+mia, "", 204)
	e.do(member, "GET", "/teams/default", "").problem(t, 404)
}

func TestTeamIsolation(t *testing.T) {
	e := newEnv(t)
	_, other := e.newMember("olga@example.com", "viewer")
	e.ok(other, "DELETE", "/teams/default/members/"+e.userID(other), "", 204) // leaves: now in no team
	e.ok(other, "POST", "/teams", `{"id":"olgas","name":"Olga's"}`, 201)
	e.ok(other, "POST", "/teams/olgas/clusters", `{"id":"olga-prod","name":"prod"}`, 201)
	// The admin of team default sees nothing of team olgas, on any path: 404, never 403.
	for _, path := range []string{"/teams/olgas", "/teams/olgas/members", "/teams/olgas/clusters", "/teams/olgas/audit",
		"/teams/olgas/invitations", "/clusters/olga-prod", "/clusters/olga-prod/join-tokens"} {
		e.do(e.admin, "GET", path, "").problem(t, 404)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"PATCH", "/teams/olgas", `{"name":"mine"}`}, {"DELETE", "/teams/olgas", ""},
		{"POST", "/teams/olgas/invitations", `{"email":"me@example.com","role":"admin"}`},
		{"POST", "/teams/olgas/clusters", `{"id":"sneaky","name":"x"}`}, {"DELETE", "/clusters/olga-prod", ""},
		{"POST", "/clusters/olga-prod/kubeconfig", ""}, {"POST", "/clusters/olga-prod/join-tokens", ""},
	} {
		e.do(e.admin, tc.method, tc.path, tc.body).problem(t, 404)
	}
	// Every team- or cluster-scoped endpoint, whatever the method: 404.
	olga := e.userID(other)
	for _, r := range (&API{}).routes() {
		if !strings.Contains(r.path, ":team") && !strings.Contains(r.path, ":cluster") {
			continue
		}
		path := strings.NewReplacer(":team", "olgas", ":cluster", "olga-prod", ":user", olga, ":id", "x1", ":node", "n1").Replace(r.path)
		body := ""
		if r.method != "GET" && r.method != "DELETE" {
			body = "{}"
		}
		e.do(e.admin, r.method, path, body).problem(t, 404)
	}
	var teams itemsOf[teamView]
	e.ok(e.admin, "GET", "/teams", "", 200).json(t, &teams)
	if len(teams.Items) != 1 || teams.Items[0].ID != "default" {
		t.Fatalf("the admin's teams: %+v", teams)
	}
	if _, err := e.ten.Cluster(t.Context(), "olga-prod"); err != nil {
		t.Fatalf("refused requests changed something: %v", err)
	}
}

func (e *env) userID(token string) string {
	e.t.Helper()
	var me meView
	e.ok(token, "GET", "/me", "", 200).json(e.t, &me)
	return me.ID
}

func TestClustersKubeconfigJoinTokens(t *testing.T) {
	e := newEnv(t)
	var cl clusterView
	e.ok(e.admin, "POST", "/teams/default/clusters", `{"id":"staging","name":"Staging","serviceCIDR":"10.100.0.0/16"}`, 201).json(t, &cl)
	if cl.ServiceCIDR != "10.100.0.0/16" || !strings.HasSuffix(cl.Server, "/clusters/staging") {
		t.Fatalf("cluster: %+v", cl)
	}
	// The cluster has its built-in objects as soon as it is answered.
	nss, err := e.st.List(t.Context(), store.ListOptions{Cluster: "staging", Resource: "namespaces"})
	if err != nil || len(nss.Items) < 4 {
		t.Fatalf("namespaces of the new cluster: %v %v", nss.Items, err)
	}
	e.do(e.admin, "POST", "/teams/default/clusters", `{"id":"staging","name":"again"}`).problem(t, 409)
	p := e.do(e.admin, "POST", "/teams/default/clusters", `{"id":"Bad_ID","name":""}`).problem(t, 422)
	if fields := fieldsOf(p); !slices.Equal(fields, []string{"id", "name"}) {
		t.Fatalf("invalid fields %v", fields)
	}
	e.do(e.admin, "POST", "/teams/default/clusters", `{"id":"c9","name":"x","serviceCIDR":"10.0.0.0/8","podCIDR":"10.1.0.0/16"}`).problem(t, 422)

	r := e.ok(e.admin, "POST", "/clusters/staging/kubeconfig", "", 201)
	cfg, err := clientcmd.Load(r.body)
	if err != nil {
		t.Fatalf("kubeconfig: %v\n%s", err, r.body)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if cfg.Clusters[ctx.Cluster].Server != cl.Server || !bytes.Equal(cfg.Clusters[ctx.Cluster].CertificateAuthorityData, testCA) {
		t.Fatalf("kubeconfig cluster: %+v", cfg.Clusters[ctx.Cluster])
	}
	if tok := cfg.AuthInfos[ctx.AuthInfo].Token; e.do(tok, "GET", "/me", "").code != 200 {
		t.Fatal("the kubeconfig's token does not authenticate")
	}

	var jt joinTokenCreated
	e.ok(e.admin, "POST", "/clusters/staging/join-tokens", `{"description":"rack 1","maxUses":2}`, 201).json(t, &jt)
	if !strings.HasPrefix(jt.Token, "K10"+caHash(testCA)+"::"+jt.JoinToken.ID+".") || jt.JoinToken.MaxUses != 2 {
		t.Fatalf("join token %q %+v", jt.Token, jt.JoinToken)
	}
	// The CA an agent fetches before it trusts the server: the one the token pins, without authentication.
	if ca := e.ok("", "GET", "/cacerts", "", 200); !bytes.Equal(ca.body, testCA) || ca.ct != "application/x-pem-file" {
		t.Fatalf("cacerts: %s %q", ca.ct, ca.body)
	}
	var jts itemsOf[joinTokenView]
	e.ok(e.admin, "GET", "/clusters/staging/join-tokens", "", 200).json(t, &jts)
	if len(jts.Items) != 1 || strings.Contains(string(r.body), jt.Token) {
		t.Fatalf("join tokens: %+v", jts)
	}
	e.ok(e.admin, "DELETE", "/clusters/staging/join-tokens/"+jt.JoinToken.ID, "", 204)
	if _, err := e.ten.UseJoinToken(t.Context(), jt.Token); err == nil {
		t.Fatal("a revoked join token still works")
	}

	e.ok(e.admin, "DELETE", "/clusters/staging", "", 204)
	nss, err = e.st.List(t.Context(), store.ListOptions{Cluster: "staging", Resource: "namespaces"})
	if err != nil || len(nss.Items) != 0 {
		t.Fatalf("objects left after deleting the cluster: %d %v", len(nss.Items), err)
	}
	e.do(e.admin, "GET", "/clusters/staging", "").problem(t, 404)
}

func fieldsOf(p Problem) []string {
	var out []string
	for _, f := range p.Errors {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

func TestTokens(t *testing.T) {
	e := newEnv(t)
	var created tokenCreated
	e.ok(e.admin, "POST", "/tokens", `{"name":"ci"}`, 201).json(t, &created)
	if !strings.HasPrefix(created.Token, "whp_") || created.APIToken.Name != "ci" {
		t.Fatalf("token: %+v", created)
	}
	e.ok(created.Token, "GET", "/me", "", 200)
	var list itemsOf[tokenView]
	e.ok(e.admin, "GET", "/tokens", "", 200).json(t, &list)
	if len(list.Items) < 2 {
		t.Fatalf("tokens: %+v", list)
	}
	// Someone else's token does not exist for the caller.
	_, other := e.newMember("ted@example.com", "viewer")
	e.do(other, "DELETE", "/tokens/"+created.APIToken.ID, "").problem(t, 404)
	e.ok(e.admin, "DELETE", "/tokens/"+created.APIToken.ID, "", 204)
	e.do(created.Token, "GET", "/me", "").problem(t, 401)
	e.do(e.admin, "POST", "/tokens", `{"name":"x","expiresAt":"2001-01-01T00:00:00Z"}`).problem(t, 422)
}

func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, token, method, path, body string
		code                            int
	}{
		{"no token", "", "GET", "/me", "", 401},
		{"bad token", "whp_nonsense", "GET", "/me", "", 401},
		{"not JSON", e.admin, "POST", "/teams", `{"id":`, 400},
		{"unknown field", e.admin, "POST", "/teams", `{"id":"a","name":"b","extra":1}`, 400},
		{"wrong type", e.admin, "POST", "/teams", `{"id":5,"name":"b"}`, 400},
		{"trailing data", e.admin, "POST", "/teams", `{"id":"a","name":"b"} {}`, 400},
		{"empty body", e.admin, "POST", "/teams", ``, 400},
		{"invalid id", e.admin, "POST", "/teams", `{"id":"-a-","name":"b"}`, 422},
		{"taken id", e.admin, "POST", "/teams", `{"id":"default","name":"b"}`, 409},
		{"bad role", e.admin, "POST", "/teams/default/invitations", `{"email":"a@b.c","role":"owner"}`, 422},
		{"bad email", e.admin, "POST", "/teams/default/invitations", `{"email":"nope","role":"viewer"}`, 422},
		{"bad audit limit", e.admin, "GET", "/teams/default/audit?limit=0", "", 422},
		{"bad invitation token", "", "POST", "/invitations/accept", `{"token":"whi_nope","password":"longenough"}`, 404},
		{"no such endpoint", e.admin, "GET", "/nope", "", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.do(tc.token, tc.method, tc.path, tc.body).problem(t, tc.code)
		})
	}
	var teams itemsOf[teamView]
	e.ok(e.admin, "GET", "/teams", "", 200).json(t, &teams)
	if len(teams.Items) != 1 {
		t.Fatalf("bad input created teams: %+v", teams)
	}
}

func TestAuditRecordsMutations(t *testing.T) {
	e := newEnv(t)
	e.ok(e.admin, "POST", "/teams/default/clusters", `{"id":"audited","name":"a"}`, 201)
	e.do(e.admin, "POST", "/teams/default/clusters", `{"id":"audited","name":"a"}`).problem(t, 409)
	var log struct {
		Items []auditView
		Next  string
	}
	e.ok(e.admin, "GET", "/teams/default/audit", "", 200).json(t, &log)
	if len(log.Items) < 2 {
		t.Fatalf("audit: %+v", log)
	}
	newest, before := log.Items[0], log.Items[1]
	if newest.Result != "409" || before.Result != "201" || newest.Actor != tenancy.AdminEmail ||
		newest.Action != "POST /teams/:team/clusters" || newest.Resource != Prefix+"/teams/default/clusters" {
		t.Fatalf("audit records: %+v %+v", newest, before)
	}
	e.ok(e.admin, "GET", "/teams/default/audit?action="+urlQuery("POST /teams/:team/clusters")+"&limit=1", "", 200).json(t, &log)
	if len(log.Items) != 1 || log.Next == "" {
		t.Fatalf("filtered page: %+v", log)
	}
	_, viewer := e.newMember("val@example.com", "viewer")
	e.do(viewer, "GET", "/teams/default/audit", "").problem(t, 403)
}

func urlQuery(s string) string {
	return strings.NewReplacer(" ", "%20", "/", "%2F", ":", "%3A").Replace(s)
}

func TestOpenAPICoversEveryRoute(t *testing.T) {
	e := newEnv(t)
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	e.ok("", "GET", "/openapi.json", "", 200).json(t, &doc)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	a := &API{}
	all := append(a.routes(), route{method: "POST", path: "/invitations/accept"}, route{method: "POST", path: "/login"},
		route{method: "POST", path: "/join"}, route{method: "GET", path: "/cacerts"})
	for _, r := range all {
		key := r.method + " " + r.path
		if _, ok := operations[key]; !ok {
			t.Errorf("route %s is not documented in operations", key)
		}
		if _, ok := doc.Paths[Prefix+toOpenAPIPath(r.path)][strings.ToLower(r.method)]; !ok {
			t.Errorf("route %s is missing from openapi.json", key)
		}
	}
	if len(operations) != len(all) {
		t.Errorf("%d documented operations, %d routes", len(operations), len(all))
	}
}

// doWith sends a request with extra headers (cookies, CSRF, Origin).
func (e *env) doWith(headers map[string]string, method, path, body string) (response, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, ct: resp.Header.Get("Content-Type"), body: b}, resp.Header
}

func TestBrowserSessions(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	sue, err := e.ten.CreateUser(ctx, "sue@example.com", "a long enough password")
	if err != nil {
		t.Fatal(err)
	}
	var inv struct{ Token string }
	e.ok(e.admin, "POST", "/teams/default/invitations", `{"email":"sue@example.com","role":"viewer"}`, 201).json(t, &inv)
	if _, err := e.ten.AcceptInvitation(ctx, inv.Token, sue.ID); err != nil {
		t.Fatal(err)
	}
	r, h := e.doWith(nil, "POST", "/login", `{"email":"sue@example.com","password":"a long enough password"}`)
	if r.code != 200 {
		t.Fatalf("login: %d %s", r.code, r.body)
	}
	var sv sessionView
	r.json(t, &sv)
	setCookie := h.Get("Set-Cookie")
	for _, attr := range []string{SessionCookie + "=", "Path=/", "Secure", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(setCookie, attr) {
			t.Errorf("Set-Cookie %q lacks %s", setCookie, attr)
		}
	}
	if strings.Contains(setCookie, "Domain=") || sv.CSRFToken == "" {
		t.Errorf("Set-Cookie %q, csrf %q", setCookie, sv.CSRFToken)
	}
	cookie := strings.SplitN(setCookie, ";", 2)[0]
	withCookie := map[string]string{"Cookie": cookie}
	if r, _ := e.doWith(withCookie, "GET", "/me", ""); r.code != 200 {
		t.Fatalf("GET /me with the session: %d %s", r.code, r.body)
	}
	var got sessionView
	if r, _ := e.doWith(withCookie, "GET", "/session", ""); r.code != 200 {
		t.Fatalf("GET /session: %d", r.code)
	} else if r.json(t, &got); got.CSRFToken != sv.CSRFToken {
		t.Fatalf("session csrf %q, login csrf %q", got.CSRFToken, sv.CSRFToken)
	}
	// A cookie-authenticated state change without the CSRF token, or from another origin, is refused.
	r, _ = e.doWith(withCookie, "POST", "/tokens", `{"name":"x"}`)
	r.problem(t, 403)
	r, _ = e.doWith(map[string]string{"Cookie": cookie, CSRFHeader: "wrong"}, "POST", "/tokens", `{"name":"x"}`)
	r.problem(t, 403)
	r, _ = e.doWith(map[string]string{"Cookie": cookie, CSRFHeader: sv.CSRFToken, "Origin": "https://evil.example"}, "POST", "/tokens", `{"name":"x"}`)
	r.problem(t, 403)
	withCSRF := map[string]string{"Cookie": cookie, CSRFHeader: sv.CSRFToken}
	if r, _ := e.doWith(withCSRF, "POST", "/tokens", `{"name":"from the browser"}`); r.code != 201 {
		t.Fatalf("POST /tokens with cookie and CSRF: %d %s", r.code, r.body)
	}
	// Unknown account and wrong password: the same answer.
	a, _ := e.doWith(nil, "POST", "/login", `{"email":"sue@example.com","password":"wrong password"}`)
	b, _ := e.doWith(nil, "POST", "/login", `{"email":"nobody@example.com","password":"wrong password"}`)
	pa, pb := a.problem(t, 401), b.problem(t, 401)
	if n := auditCount(t, e, "POST /login", "401"); n == 0 {
		t.Error("a failed sign-in of a known account is not in its team's audit log")
	}
	if pa.Detail != pb.Detail || pa.Title != pb.Detail && pa.Title != pb.Title {
		t.Errorf("different answers: %+v vs %+v", pa, pb)
	}
	// Logout ends the session server-side.
	if r, _ := e.doWith(withCSRF, "POST", "/logout", ""); r.code != 204 {
		t.Fatalf("logout: %d %s", r.code, r.body)
	}
	r, _ = e.doWith(withCookie, "GET", "/me", "")
	r.problem(t, 401)
	// A password change ends every session.
	r, h = e.doWith(nil, "POST", "/login", `{"email":"sue@example.com","password":"a long enough password"}`)
	r.json(t, &sv)
	cookie = strings.SplitN(h.Get("Set-Cookie"), ";", 2)[0]
	other, h2 := e.doWith(nil, "POST", "/login", `{"email":"sue@example.com","password":"a long enough password"}`)
	if other.code != 200 {
		t.Fatal(other.code)
	}
	otherCookie := strings.SplitN(h2.Get("Set-Cookie"), ";", 2)[0]
	r, _ = e.doWith(map[string]string{"Cookie": cookie, CSRFHeader: sv.CSRFToken}, "POST", "/password", `{"current":"wrong","new":"another long password"}`)
	r.problem(t, 422)
	if r, _ := e.doWith(map[string]string{"Cookie": cookie, CSRFHeader: sv.CSRFToken}, "POST", "/password",
		`{"current":"a long enough password","new":"another long password"}`); r.code != 204 {
		t.Fatalf("password change: %d %s", r.code, r.body)
	}
	r, _ = e.doWith(map[string]string{"Cookie": otherCookie}, "GET", "/me", "")
	r.problem(t, 401)
	r, _ = e.doWith(nil, "POST", "/login", `{"email":"sue@example.com","password":"a long enough password"}`)
	r.problem(t, 401)
}

func TestLoginThrottling(t *testing.T) {
	frozen := time.Now() // the back-off does not run out while the test runs
	e := newEnv(t, func(c *tenancy.Config) { c.Now = func() time.Time { return frozen } })
	if _, err := e.ten.CreateUser(t.Context(), "tom@example.com", "the right password!"); err != nil {
		t.Fatal(err)
	}
	for range tenancy.FreeFailures {
		if r, _ := e.doWith(nil, "POST", "/login", `{"email":"tom@example.com","password":"guess"}`); r.code != 401 {
			t.Fatalf("failed login: %d", r.code)
		}
	}
	// The back-off of this account from this address: a second before the next attempt is evaluated.
	r, h := e.doWith(nil, "POST", "/login", `{"email":"tom@example.com","password":"the right password!"}`)
	r.problem(t, 429)
	if got := h.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want the back-off's 1 second", got)
	}
}

// auditCount counts the records of team default with action and result (as its admin reads them).
func auditCount(t *testing.T, e *env, action, result string) int {
	t.Helper()
	var log struct{ Items []auditView }
	e.ok(e.admin, "GET", "/teams/default/audit?limit=1000", "", 200).json(t, &log)
	n := 0
	for _, ev := range log.Items {
		if ev.Action == action && ev.Result == result {
			n++
		}
	}
	return n
}
