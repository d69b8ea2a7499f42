package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/labstack/echo/v4"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/rbac"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/server/platform"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
	"github.com/wheelhouse-dev/wheelhouse/web/live"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is the dashboard on a real PostgreSQL, with the real Kubernetes API, platform API and RBAC, served by an
// httptest TLS server: team t1 owns cluster c1, team t2 owns c2 (apitest's clusters).
type env struct {
	t     *testing.T
	ten   *tenancy.Store
	api   *kubeapi.API
	srv   *httptest.Server
	users map[string]tenancy.User
}

type tenancyClusters struct{ ten *tenancy.Store }

func (c tenancyClusters) Cluster(ctx context.Context, id string) (kubeapi.Cluster, error) {
	cl, err := c.ten.Cluster(ctx, id)
	if errors.Is(err, tenancy.ErrNotFound) {
		return kubeapi.Cluster{}, kubeapi.ErrClusterNotFound
	}
	if err != nil {
		return kubeapi.Cluster{}, err
	}
	return kubeapi.Cluster{ID: cl.ID, ServiceCIDR: cl.ServiceCIDR.String(), PodCIDR: cl.PodCIDR.String()}, nil
}

type apiClusters struct{ api *kubeapi.API }

func (c apiClusters) EnsureCluster(ctx context.Context, id string) error {
	return c.api.EnsureCluster(ctx, id)
}
func (c apiClusters) DeleteClusterObjects(ctx context.Context, id string) error {
	return c.api.DeleteClusterObjects(ctx, id)
}

const testPassword = "correct horse battery"

// newEnv starts the dashboard with users owner@t1 (owner of t1), viewer@t1 (viewer of t1) and owner@t2.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := t.Context()
	db := pgtest.NewDatabase(t)
	ten, err := tenancy.Open(ctx, tenancy.Config{URL: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ten.Close)
	e := &env{t: t, ten: ten, users: map[string]tenancy.User{}}
	for _, email := range []string{"owner@t1.example", "viewer@t1.example", "owner@t2.example"} {
		u, err := ten.CreateUser(ctx, email, testPassword)
		if err != nil {
			t.Fatal(err)
		}
		e.users[email] = u
	}
	for _, tc := range []struct{ team, owner, cluster string }{{"t1", "owner@t1.example", "c1"}, {"t2", "owner@t2.example", "c2"}} {
		if _, err := ten.CreateTeam(ctx, e.users[tc.owner].ID, tc.team, strings.ToUpper(tc.team)); err != nil {
			t.Fatal(err)
		}
		if _, err := ten.CreateCluster(ctx, tc.team, tc.cluster, "Cluster "+tc.cluster, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	tok, _, err := ten.CreateInvitation(ctx, "t1", "viewer@t1.example", tenancy.RoleViewer, e.users["owner@t1.example"].ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ten.AcceptInvitation(ctx, tok, e.users["viewer@t1.example"].ID); err != nil {
		t.Fatal(err)
	}
	var authz kubeapi.Authorizer
	var reg *resources.Registry
	e.api, reg = apitest.NewOn(t, db, func(c *kubeapi.Config) {
		c.Clusters = tenancyClusters{ten}
		authz = c.Authorizer
	})
	policy, err := rbac.NewPlatform()
	if err != nil {
		t.Fatal(err)
	}
	plat, err := platform.New(platform.Config{Tenancy: ten, Policy: policy, Clusters: apiClusters{e.api},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Tenancy: ten, API: e.api, Registry: reg, Authorizer: authz, Policy: policy,
		Platform: plat.Handler(), Logger: slog.New(slog.DiscardHandler),
		Live: live.Options{Interval: 20 * time.Millisecond, CheckEvery: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ech := echo.New()
	d.Register(ech)
	plat.Register(ech)
	e.srv = httptest.NewTLSServer(ech)
	t.Cleanup(e.srv.Close)
	return e
}

// admin is an in-process clientset of cluster as system:masters.
func (e *env) admin(cluster string) kubernetes.Interface { return apitest.Admin(e.t, e.api, cluster) }

// browser is an HTTP client with its own cookies that does not follow redirects.
type browser struct {
	e    *env
	c    *http.Client
	csrf string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	c := new(http.Client)
	*c = *e.srv.Client() // a copy: the server's client is shared, each browser has its own cookies
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{e: e, c: c}
}

// signedIn is a browser signed in as email (with the session's CSRF token read from a page).
func (e *env) signedIn(email string) *browser {
	e.t.Helper()
	b := e.browser()
	resp := b.post("/ui/signin", url.Values{"email": {email}, "password": {testPassword}}, false)
	if resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("sign in as %s: %d", email, resp.StatusCode)
	}
	doc := b.page("/ui/account", http.StatusOK)
	b.csrf, _ = doc.Find(`input[name=_csrf]`).First().Attr("value")
	if b.csrf == "" {
		e.t.Fatal("no CSRF token on the account page")
	}
	return b
}

func (b *browser) do(req *http.Request) *http.Response {
	b.e.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	b.e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (b *browser) get(path string) *http.Response {
	b.e.t.Helper()
	req, err := http.NewRequestWithContext(b.e.t.Context(), http.MethodGet, b.e.srv.URL+path, nil)
	if err != nil {
		b.e.t.Fatal(err)
	}
	return b.do(req)
}

// post sends a form, with the session's CSRF token when withCSRF, from this origin.
func (b *browser) post(path string, form url.Values, withCSRF bool) *http.Response {
	b.e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if withCSRF {
		form.Set(csrfField, b.csrf)
	}
	req, err := http.NewRequestWithContext(b.e.t.Context(), http.MethodPost, b.e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.e.srv.URL)
	return b.do(req)
}

// page GETs path, checks the status and parses the HTML.
func (b *browser) page(path string, want int) *goquery.Document {
	b.e.t.Helper()
	return parsePage(b.e.t, b.get(path), want)
}

func parsePage(t *testing.T, resp *http.Response, want int) *goquery.Document {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d\n%s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// testid selects elements by data-testid.
func testid(doc *goquery.Document, id string) *goquery.Selection {
	return doc.Find(`[data-testid="` + id + `"]`)
}
