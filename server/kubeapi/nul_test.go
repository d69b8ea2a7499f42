package kubeapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errorLog keeps the messages of ERROR records: a client's bad input must never log one.
type errorLog struct {
	mu   sync.Mutex // guards msgs
	msgs []string
}

func (l *errorLog) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelError }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

func (l *errorLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.msgs
	l.msgs = nil
	return out
}

// TestUnstorableNames is the regression test of issue 34 item 11: a NUL byte (or invalid UTF-8, or a name
// longer than a store key holds) in a resource name or namespace reached the store, whose ErrInvalid became a
// 500 and an error log. Every such request is a Status with the right code and reason, and logs nothing: in
// the URL the object (or namespace) cannot exist, 404 as upstream; in a body it is 422 on metadata.name; in
// selectors and other parameters it is matched or refused as upstream parses it.
func TestUnstorableNames(t *testing.T) {
	long := strings.Repeat("a", 1100)
	type tc struct {
		name, method, path, ct, body string
		code                         int
		reason                       metav1.StatusReason
		field                        string // the cause's field of a 422
	}
	cases := []tc{
		{"get name NUL", "GET", rawCMs + "/a%00b", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"get name bad UTF-8", "GET", rawCMs + "/a%FFb", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"get name too long", "GET", rawCMs + "/" + long, "", "", 404, metav1.StatusReasonNotFound, ""},
		{"delete name NUL", "DELETE", rawCMs + "/a%00b", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"update name NUL", "PUT", rawCMs + "/a%00b", "application/json", `{"metadata":{"name":"a\u0000b"}}`, 404, metav1.StatusReasonNotFound, ""},
		{"merge patch name NUL", "PATCH", rawCMs + "/a%00b", "application/merge-patch+json", `{"data":{"a":"b"}}`, 404, metav1.StatusReasonNotFound, ""},
		{"apply name NUL", "PATCH", rawCMs + "/a%00b?fieldManager=t", "application/apply-patch+yaml",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a\u0000b"}}`, 404, metav1.StatusReasonNotFound, ""},
		{"status of name NUL", "GET", rawPods + "/a%00b/status", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"log of name NUL", "GET", rawPods + "/a%00b/log", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"token of account NUL", "POST", "/api/v1/namespaces/default/serviceaccounts/a%00b/token", "application/json", `{}`, 404, metav1.StatusReasonNotFound, ""},
		{"get namespace NUL", "GET", "/api/v1/namespaces/a%00b", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"delete namespace NUL", "DELETE", "/api/v1/namespaces/a%00b", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"get in namespace NUL", "GET", "/api/v1/namespaces/a%00b/configmaps/x", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"list in namespace NUL", "GET", "/api/v1/namespaces/a%00b/configmaps", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"list in namespace bad UTF-8", "GET", "/api/v1/namespaces/a%FFb/configmaps", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"watch in namespace NUL", "GET", "/api/v1/namespaces/a%00b/configmaps?watch=1&timeoutSeconds=1", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"create in namespace NUL", "POST", "/api/v1/namespaces/a%00b/configmaps", "application/json", `{"metadata":{"name":"x"}}`, 404, metav1.StatusReasonNotFound, ""},
		{"deletecollection in namespace NUL", "DELETE", "/api/v1/namespaces/a%00b/configmaps", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"create configmap NUL", "POST", rawCMs, "application/json", `{"metadata":{"name":"a\u0000b"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"create namespace NUL", "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"a\u0000b"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"create role NUL", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", "application/json",
			`{"metadata":{"name":"a\u0000b"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"create role NUL dry run", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles?dryRun=All", "application/json",
			`{"metadata":{"name":"a\u0000b"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"create role generateName NUL", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", "application/json",
			`{"metadata":{"generateName":"a\u0000"}}`, 422, metav1.StatusReasonInvalid, "metadata.generateName"},
		{"create cluster role NUL", "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json",
			`{"metadata":{"name":"a\u0000b"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"create cluster role too long", "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json",
			`{"metadata":{"name":"` + long + `"}}`, 422, metav1.StatusReasonInvalid, "metadata.name"},
		{"update body name NUL", "PUT", rawCMs + "/ok", "application/json", `{"metadata":{"name":"ok\u0000"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"label selector NUL", "GET", rawCMs + "?labelSelector=a%3Db%00c", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"label selector ending in NUL", "GET", rawCMs + "?labelSelector=a%3Db%00", "", "", 200, "", ""},
		{"field selector NUL", "GET", rawCMs + "?fieldSelector=metadata.name%3Db%00", "", "", 200, "", ""},
		{"all-namespace field selector NUL", "GET", "/api/v1/configmaps?fieldSelector=metadata.namespace%3Db%00", "", "", 200, "", ""},
		{"pods by node NUL", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn%00", "", "", 200, "", ""},
		{"watch label selector NUL", "GET", rawCMs + "?watch=1&labelSelector=a%3Db%00c", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"watch field selector NUL", "GET", rawCMs + "?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Db%00", "", "", 200, "", ""},
		{"resourceVersion NUL", "GET", rawCMs + "?resourceVersion=1%00", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"continue NUL", "GET", rawCMs + "?limit=1&continue=a%00", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"limit NUL", "GET", rawCMs + "?limit=1%00", "", "", 400, metav1.StatusReasonBadRequest, ""},
		{"group NUL", "GET", "/apis/a%00b/v1/things", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"resource NUL", "GET", "/api/v1/x%00", "", "", 404, metav1.StatusReasonNotFound, ""},
	}
	readPaths(t, func(t *testing.T, path func(*Config)) {
		logs := &errorLog{}
		env := newTestEnv(t, path, func(c *Config) { c.Logger = slog.New(logs) })
		env.rawCreate(t, rawCMs, `{"metadata":{"name":"ok"}}`)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var body io.Reader
				if c.body != "" {
					body = strings.NewReader(c.body)
				}
				resp := env.rawDo(t, c.method, c.path, c.ct, body)
				if msgs := logs.take(); len(msgs) > 0 {
					t.Errorf("logged errors: %q", msgs)
				}
				if c.code == http.StatusOK {
					if resp.code != http.StatusOK {
						t.Fatalf("%d %s, want 200", resp.code, resp.body)
					}
					return
				}
				st := resp.wantStatus(t, c.code, c.reason)
				if strings.Contains(st.Message, "store:") || strings.Contains(st.Message, "Internal") {
					t.Errorf("an internal message: %q", st.Message)
				}
				if c.field != "" && (st.Details == nil ||
					!slices.ContainsFunc(st.Details.Causes, func(c2 metav1.StatusCause) bool { return c2.Field == c.field })) {
					b, _ := json.Marshal(st.Details)
					t.Errorf("causes %s, want one on %s", b, c.field)
				}
			})
		}
	})
}
