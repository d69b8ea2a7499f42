package apiproxy

import (
	"encoding/pem"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// BenchmarkInClusterGet: what the node's API proxy adds to a request — client-go getting one ConfigMap from the
// real API over HTTPS, directly from the server (as a kubeconfig user does) and through the proxy (as a pod
// does: the proxy terminates TLS and forwards over its own HTTP/2 connection to the server). One request at a
// time: the time per operation is the latency a client sees; client, proxy and server share this process.
func BenchmarkInClusterGet(b *testing.B) {
	en := newEnv(b)
	ctx := b.Context()
	if _, err := clientset(b, en.inCluster(b, "c1", "10.96.0.1", "pod")).CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	direct := &rest.Config{Host: en.srv.URL + "/clusters/c1", BearerToken: "pod", TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: en.srv.Certificate().Raw})}}
	for _, c := range []struct {
		name string
		cfg  *rest.Config
	}{{"direct", direct}, {"through the node's proxy", en.inCluster(b, "c1", "10.96.0.1", "pod")}} {
		b.Run(c.name, func(b *testing.B) {
			c.cfg.QPS, c.cfg.Burst = -1, 0 // no client-side rate limit
			cms := clientset(b, c.cfg).CoreV1().ConfigMaps("default")
			b.ReportAllocs()
			for b.Loop() {
				if cm, err := cms.Get(ctx, "bench", metav1.GetOptions{}); err != nil || cm.Data["k"] != "v" {
					b.Fatalf("get: %v", err)
				}
			}
		})
	}
}
