package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

func TestMetrics(t *testing.T) {
	st, _ := openStore(t)
	_, ts := newTestServer(t, Config{Store: st})
	if _, err := st.Create(t.Context(), store.Key{Cluster: "c", Resource: "pods", Namespace: "ns", Name: "p"},
		[]byte("{}")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	wantStatus(t, get(t, ts.URL+"/livez"), http.StatusOK)
	wantStatus(t, get(t, ts.URL+"/nope/42"), http.StatusNotFound)

	r := get(t, ts.URL+"/metrics")
	wantStatus(t, r, http.StatusOK)
	wantContains(t, r.body,
		"go_goroutines ",
		"process_start_time_seconds ",
		`wheelhouse_build_info{commit="abc123",go_version="go1.26.8",version="v1.2.3"} 1`,
		`wheelhouse_http_requests_total{code="200",method="GET",route="/livez"} 1`,
		`wheelhouse_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`wheelhouse_http_request_duration_seconds_bucket{code="200",method="GET",route="/livez",le="+Inf"} 1`,
		"wheelhouse_store_up 1\n",
		"wheelhouse_store_revision 1\n",
	)
}

func TestMetricsStoreDown(t *testing.T) {
	_, ts := newTestServer(t, Config{Store: &fakeStore{err: errors.New("down")}})
	r := get(t, ts.URL+"/metrics")
	wantStatus(t, r, http.StatusOK) // the scrape itself still works
	wantContains(t, r.body, "wheelhouse_store_up 0\n")
	if got := r.body; strings.Contains(got, "wheelhouse_store_revision ") {
		t.Errorf("revision reported while the store is down:\n%s", got)
	}
}

func TestMetricsSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	extra := prometheus.NewCounter(prometheus.CounterOpts{Name: "wheelhouse_test_total", Help: "test"})
	reg.MustRegister(extra)
	extra.Inc()
	_, ts := newTestServer(t, Config{Store: &fakeStore{}, Registry: reg})
	wantContains(t, get(t, ts.URL+"/metrics").body, "wheelhouse_test_total 1\n")
	if _, err := New(Config{Store: &fakeStore{}, Registry: reg}); err == nil {
		t.Error("a second server on the same registry: want a duplicate registration error")
	}
}
