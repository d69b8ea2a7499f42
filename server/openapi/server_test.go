package openapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// testPrefix is the per-cluster path the test server serves the API under.
const testPrefix = "/clusters/x"

// newTestServer serves s's documents under testPrefix, as the API server wires the handlers.
func newTestServer(t *testing.T, s *Spec) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc(testPrefix+"/openapi/v2", s.ServeV2)
	mux.HandleFunc(testPrefix+"/openapi/v3", func(w http.ResponseWriter, r *http.Request) {
		s.ServeV3Root(w, r, testPrefix)
	})
	mux.HandleFunc(testPrefix+"/openapi/v3/", func(w http.ResponseWriter, r *http.Request) {
		s.ServeV3GroupVersion(w, r, testPrefix, strings.TrimPrefix(r.URL.Path, testPrefix+"/openapi/v3/"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// newDiscovery is a client-go discovery client for the cluster behind testPrefix.
func newDiscovery(t *testing.T, srv *httptest.Server) *discovery.DiscoveryClient {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL + testPrefix})
	if err != nil {
		t.Fatal(err)
	}
	return dc
}
