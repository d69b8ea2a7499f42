package kubeapi

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recordingAuditor keeps what it is handed.
type recordingAuditor struct {
	mu      sync.Mutex // guards records
	records []AuditRecord
}

func (a *recordingAuditor) Record(r AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.records = append(a.records, r)
}

// Every mutating request is audited with a verb, refused or not: the verb is known from the URL and method
// before authentication (issue 34: refused requests had none, and the audit log refused their whole batch).
func TestAuditRecordsHaveAVerb(t *testing.T) {
	aud := &recordingAuditor{}
	env := newTestEnv(t, func(c *Config) { c.Auditor = aud })
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`
	for _, tc := range []struct {
		method, token, path string
		wantVerb            string
		wantCode            int
	}{
		{"POST", "", "/clusters/c1/x", "post", 401},
		{"POST", "", "/clusters/c1/api/v1/namespaces/default/configmaps", "create", 401},
		{"DELETE", "wrong", "/clusters/c1/api/v1/namespaces/default/configmaps/x", "delete", 401},
		{"PUT", "", "/clusters/nope/api/v1/namespaces/default/configmaps/x", "update", 401},
		{"PATCH", viewerToken, "/clusters/c1/api/v1/namespaces/default/configmaps/x", "patch", 403},
		{"POST", viewerToken, "/clusters/c1/version", "post", 403},
		{"PROPFIND", adminToken, "/clusters/c1/api/v1/namespaces/default/configmaps", "propfind", 405},
		{"POST", adminToken, "/clusters/c1/api/v1/namespaces/default/configmaps", "create", 201},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, env.url+tc.path, strings.NewReader(cm))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		aud.mu.Lock()
		var got AuditRecord
		if n := len(aud.records); n > 0 {
			got = aud.records[n-1]
		}
		aud.records = nil
		aud.mu.Unlock()
		want := AuditRecord{Verb: tc.wantVerb, Code: tc.wantCode, Path: tc.path}
		if diff := cmp.Diff(want, AuditRecord{Verb: got.Verb, Code: got.Code, Path: got.Path}); diff != "" || res.StatusCode != tc.wantCode {
			t.Errorf("%s %s: status %d, audit record (-want +got):\n%s", tc.method, tc.path, res.StatusCode, diff)
		}
	}
}
