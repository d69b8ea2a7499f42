package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// TestAuditSurvivesRefusedFlood is issue 34's first attack: anyone, without credentials, floods a cluster's
// Kubernetes API with requests that are refused. Each refused request is audited; none of them may cost the
// audit record of anyone else's request written in the same batch. The admin's 10 ConfigMaps are all in the
// audit log, and the refused requests are there too, with a real action.
func TestAuditSurvivesRefusedFlood(t *testing.T) {
	bin := buildBinary(t)
	p := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}, "--data-dir", t.TempDir())
	p.waitReady(t)

	// The flood runs until the test has read what it wants (or failed): every batch the audit writer flushes
	// meanwhile holds refused requests.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if code := kubeRequest(ctx, p.url, "", "POST", "/clusters/default/x", `{}`); code == http.StatusUnauthorized {
					refused.Add(1)
				}
			}
		})
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	waitFor(t, func() bool { return refused.Load() > 0 })

	for i := range 10 {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"audited-%d"}}`, i)
		if code := kubeRequest(t.Context(), p.url, e2eToken, "POST", "/clusters/default/api/v1/namespaces/default/configmaps", body); code != http.StatusCreated {
			t.Fatalf("create ConfigMap audited-%d: %d", i, code)
		}
	}
	// The audit log is written in the background: poll until every ConfigMap is there, for 30 s at most.
	const collection = "/clusters/default/api/v1/namespaces/default/configmaps"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); ; <-tick.C {
		audited := 0
		for _, e := range auditEvents(t, p.url, "cluster=default&action="+url.QueryEscape("create configmaps")) {
			if e.Actor == "admin@localhost" && e.Result == "201" && e.Resource == collection {
				audited++
			}
		}
		if audited == 10 {
			break
		}
		if audited > 10 || time.Now().After(deadline) {
			t.Fatalf("%d of the admin's 10 ConfigMap creates are in the audit log (%d refused requests sent meanwhile)",
				audited, refused.Load())
		}
	}
	stop()
	wg.Wait()
	// The refused requests are audited too: anonymous, 401, the action named by the method.
	refusedLog := auditEvents(t, p.url, "cluster=default&actor=anonymous&limit=10")
	if len(refusedLog) == 0 {
		t.Fatalf("no refused request is in the audit log (%d were sent)", refused.Load())
	}
	for _, e := range refusedLog {
		if e.Action != "post" || e.Result != "401" || e.Resource != "/clusters/default/x" {
			t.Errorf("refused request audited as %+v, want action post, result 401, resource /clusters/default/x", e)
		}
	}
	if p.log.field("writing audit events failed; they are lost", "msg") != "" {
		t.Errorf("the audit writer lost a batch")
	}
}

// kubeRequest sends a Kubernetes API request (token "" for none) and returns its status code (0 when it could
// not be sent, as when ctx ends).
func kubeRequest(ctx context.Context, base, token, method, path, body string) int {
	return requestWith(ctx, base, token, nil, method, path, body)
}

// requestWith is kubeRequest with header added to the request.
func requestWith(ctx context.Context, base, token string, header http.Header, method, path, body string) int {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return 0
	}
	if header != nil {
		req.Header = header.Clone()
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := testHTTP.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// auditRecord is one record of the platform API's audit log.
type auditRecord struct {
	Actor, Action, Resource, Result, Source string
}

// auditEvents reads team default's audit log through the platform API, as the admin, with query (URL-encoded).
func auditEvents(t *testing.T, base, query string) []auditRecord {
	t.Helper()
	code, b := platformCall(t, base, e2eToken, "GET", "/teams/default/audit?"+query, "")
	if code != http.StatusOK {
		t.Fatalf("read the audit log: %d %s", code, b)
	}
	var page struct{ Items []auditRecord }
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("audit log: %v: %s", err, b)
	}
	return page.Items
}
