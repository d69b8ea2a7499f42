package main

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestAuditSourceAddress is issue 34's item 7: the audit log's source address is the connection's, whatever
// X-Forwarded-For and X-Real-IP say, unless the operator names the proxy the connection comes from
// (--trusted-proxies); then it is the address the proxy forwards. Both APIs, the platform's and the
// Kubernetes one, record the same address.
func TestAuditSourceAddress(t *testing.T) {
	bin := buildBinary(t)
	const forged = "203.0.113.66"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"forged headers are ignored", nil, "127.0.0.1"},
		{"a trusted proxy's header is believed", []string{"--trusted-proxies", "192.0.2.0/24, 127.0.0.1/32"}, forged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
				"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, append([]string{"--data-dir", t.TempDir()}, tc.args...)...)
			p.waitReady(t)
			header := http.Header{"X-Forwarded-For": {forged}, "X-Real-Ip": {forged}}
			if code := forwardedRequest(t.Context(), p.url, header, "/platform/v1/tokens", `{"name":"ci"}`); code != http.StatusCreated {
				t.Fatalf("create an API token: %d", code)
			}
			if code := forwardedRequest(t.Context(), p.url, header, "/clusters/default/api/v1/namespaces/default/configmaps",
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"from-afar"}}`); code != http.StatusCreated {
				t.Fatalf("create a ConfigMap: %d", code)
			}
			platform := auditEvents(t, p.url, "action="+url.QueryEscape("POST /tokens"))
			if len(platform) != 1 || platform[0].Source != tc.want {
				t.Errorf("platform API audit records %+v, want one from %s", platform, tc.want)
			}
			// The Kubernetes API's records are written in the background.
			var kube []auditRecord
			waitFor(t, func() bool {
				kube = auditEvents(t, p.url, "cluster=default&actor=admin@localhost&action="+url.QueryEscape("create configmaps"))
				return len(kube) > 0
			})
			if len(kube) != 1 || kube[0].Source != tc.want {
				t.Errorf("Kubernetes API audit records %+v, want one from %s", kube, tc.want)
			}
		})
	}
}

// forwardedRequest POSTs body to path as the admin, with header added, and returns the status code.
func forwardedRequest(ctx context.Context, base string, header http.Header, path, body string) int {
	return requestWith(ctx, base, e2eToken, header, http.MethodPost, path, body)
}
