//lint:file-ignore SA1019 core/v1 Endpoints is deprecated but still served, and tested.

package kubeapi

import (
	"net/netip"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// TestAPIEndpoints: every cluster's default/kubernetes has Endpoints and an EndpointSlice naming the API's
// advertised address (the conformance suite's "should have Endpoints and EndpointSlices pointing to API
// Server"), corrected when a server starts with another address; without one, none are written.
func TestAPIEndpoints(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.APIEndpoint = netip.MustParseAddrPort("192.0.2.10:8443") })
	cs := env.client(t, "c1")
	check := func(ip string, port int32) {
		t.Helper()
		ctx := t.Context()
		eps, err := cs.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(eps.Subsets) != 1 || len(eps.Subsets[0].Addresses) != 1 || eps.Subsets[0].Addresses[0].IP != ip ||
			len(eps.Subsets[0].Ports) != 1 || eps.Subsets[0].Ports[0].Port != port {
			t.Fatalf("endpoints subsets %+v, want %s:%d", eps.Subsets, ip, port)
		}
		if eps.Labels[discoveryv1.LabelSkipMirror] != "true" {
			t.Errorf("endpoints labels %v, want skip-mirror", eps.Labels)
		}
		slices, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
		if err != nil {
			t.Fatal(err)
		}
		if len(slices.Items) != 1 {
			t.Fatalf("%d slices of default/kubernetes, want 1", len(slices.Items))
		}
		s := slices.Items[0]
		if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 ||
			s.Endpoints[0].Addresses[0] != ip || len(s.Ports) != 1 || *s.Ports[0].Port != port {
			t.Fatalf("slice %+v, want %s:%d", s, ip, port)
		}
	}
	check("192.0.2.10", 8443)

	// A server started with another address corrects them.
	other, err := New(Config{Storage: env.store, Registry: resources.Default(), Clusters: fakeClusters{}, Authenticator: fakeAuth{},
		Authorizer: mastersAuthorizer{}, APIEndpoint: netip.MustParseAddrPort("192.0.2.20:443")})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.EnsureCluster(t.Context(), "c1"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, func() bool {
		eps, err := cs.CoreV1().Endpoints("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
		return err == nil && len(eps.Subsets) == 1 && eps.Subsets[0].Addresses[0].IP == "192.0.2.20"
	})
	check("192.0.2.20", 443)

	// Without an address, none.
	bare := newTestEnv(t).client(t, "c1")
	if _, err := bare.CoreV1().Endpoints("default").Get(t.Context(), "kubernetes", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("endpoints without an advertised address: %v, want NotFound", err)
	}
}
