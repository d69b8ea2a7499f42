package perf

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespaces of the scenarios, so that each one lists and watches only its own objects.
const (
	nsCreate = "perf-create"
	nsList   = "perf-list"
	nsWatch  = "perf-watch"
)

// requestTimeout bounds a single create, update or list: a request that takes longer is an error, not a hang.
const requestTimeout = 60 * time.Second

// perfPod is a realistic pod as a Deployment would stamp it out: one container with an image, ports, an
// environment variable, resource requests and limits, and a few labels.
func perfPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"app": "web", "tier": "frontend", "release": "stable", "pod-template-hash": "7d9f8c6b5",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "web",
			Image: "registry.example.com/shop/web:1.27.3",
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
			},
			Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				},
				Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
				},
			},
		}}},
	}
}

// createScenario creates pods in nsCreate on an open-loop schedule and measures each create from its scheduled
// start to its response, with the CPU of the server, PostgreSQL and the harness over the phase.
func (r *apiRunner) createScenario(ctx context.Context, t *apiTarget, rep int) CreateResult {
	loop := openLoop{rate: r.cfg.CreateRate, duration: r.cfg.CreateDuration}
	n := loop.n()
	lat := make([]time.Duration, n)
	ok := make([]bool, n)
	var errs errCount
	pods := t.srv.cs.CoreV1().Pods(nsCreate)
	m := newAPIMeter(t.srv.pid(), r.pg.procs())
	st := loop.run(ctx, func(i int, due time.Time) {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		_, err := pods.Create(rctx, perfPod(fmt.Sprintf("r%d-%06d", rep, i)), metav1.CreateOptions{})
		if err != nil {
			errs.add(err)
			return
		}
		lat[i], ok[i] = time.Since(due), true
	})
	res := CreateResult{Scheduled: n, Late: st.Late, MaxLag: st.MaxLag, Elapsed: st.Elapsed, CPU: m.cores(),
		ServerRSS: t.srv.rss(), Errors: errs.n, FirstErr: errs.first}
	var good []time.Duration
	for i, d := range lat {
		if ok[i] {
			good = append(good, d)
		}
	}
	res.OK = len(good)
	res.P50, res.P99, res.Max = percentile(good, 50), percentile(good, 99), percentile(good, 100)
	if st.Started < n {
		res.Err = fmt.Sprintf("stopped after %d of %d creates: %v", st.Started, n, ctx.Err())
	}
	if err := t.srv.alive(); err != nil {
		res.Err = err.Error()
	}
	return res
}

// errCount counts errors and keeps the first, from many goroutines.
type errCount struct {
	mu    sync.Mutex
	n     int
	first string
}

func (e *errCount) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		e.first = err.Error()
	}
	e.n++
}
