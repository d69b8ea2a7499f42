package kubeapi

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27",
			Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
}

func newBenchEnv(b *testing.B) *testEnv {
	b.Helper()
	return newTestEnvTB(b)
}

// BenchmarkCreatePod measures a pod create through the whole pipeline (HTTP, JSON, defaulting, validation,
// managed fields, PostgreSQL commit) with parallel clients.
func BenchmarkCreatePod(b *testing.B) {
	env := newBenchEnv(b)
	cs := env.clientTB(b, "c1")
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("p%d", n.Add(1))
			if _, err := cs.CoreV1().Pods("default").Create(b.Context(), benchPod(name), metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkListPods10k measures a consistent list of 10,000 pods as JSON and as a Table.
func BenchmarkListPods10k(b *testing.B) {
	env := newBenchEnv(b)
	cs := env.clientTB(b, "c1")
	for i := range 10000 {
		if _, err := cs.CoreV1().Pods("default").Create(b.Context(), benchPod(fmt.Sprintf("p%05d", i)), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	rc, err := rest.RESTClientFor(restConfigFor(env.config("c1", adminToken)))
	if err != nil {
		b.Fatal(err)
	}
	for _, accept := range []string{"application/json", "application/json;as=Table;v=v1;g=meta.k8s.io"} {
		b.Run(accept, func(b *testing.B) {
			for b.Loop() {
				res := rc.Get().AbsPath(Prefix("c1"), "api/v1/namespaces/default/pods").SetHeader("Accept", accept).Do(b.Context())
				if err := res.Error(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
