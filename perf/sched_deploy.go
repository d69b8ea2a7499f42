package perf

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/controllers"
	"github.com/wheelhouse-dev/wheelhouse/scheduler"
)

// deployment is a Deployment of replicas pods like the plain case's (100m, 500 MiB), labelled app=name.
func deployment(name string, replicas int) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	tmpl := basePod("", schedPodCPU, schedPodMemory, labels)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: schedNamespace},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: tmpl.Spec}},
	}
}

// deployRun times one rollout: a fresh database and API with DeployNodes nodes, the controllers (as the server
// runs them) and the scheduler started and proven live by a one-replica warm-up Deployment, then the
// measured Deployment created (what `kubectl apply` of a new Deployment does) and every one of its pods watched
// from creation to binding.
func (r *schedRunner) deployRun(ctx context.Context, rep int) (out DeployRun) {
	out = DeployRun{Rep: rep, Replicas: r.cfg.DeployReplicas, Nodes: r.cfg.DeployNodes}
	env, err := r.openAPI(ctx, fmt.Sprintf("sched_deploy_%d", rep))
	if err != nil {
		out.Err = err.Error()
		return out
	}
	defer env.close()
	t0 := time.Now()
	if err := createNodes(ctx, env.cs, r.cfg.DeployNodes, r.cfg.Workers); err != nil {
		out.Err = "loading: " + err.Error()
		return out
	}
	out.Setup = time.Since(t0)
	stop, err := r.startControlPlane(ctx, env)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	defer func() { stop(); out.Warnings = env.warn.warnings() }()
	if err := rollout(ctx, env.cs, deployment("warmup", 1), r.cfg.Timeout, nil); err != nil {
		out.Err = "warm-up deployment: " + err.Error()
		return out
	}
	r.settle(ctx)
	meter := newSchedMeter(r.pg.procs())
	var t rolloutTimes
	err = rollout(ctx, env.cs, deployment("web", r.cfg.DeployReplicas), r.cfg.Timeout, &t)
	out.CPU = meter.cores()
	out.Created, out.Bound = len(t.created), len(t.bound)
	out.AllCreated, out.AllBound = t.last(t.created), t.last(t.bound)
	var lat []time.Duration
	for name, b := range t.bound {
		lat = append(lat, b-t.created[name])
	}
	out.BindP50, out.BindP99 = percentile(lat, 50), percentile(lat, 99)
	if err != nil {
		out.Err = err.Error()
	}
	return out
}

// startControlPlane runs every controller and the scheduler on env until stop is called, sharing one event
// recorder as the server does.
func (r *schedRunner) startControlPlane(ctx context.Context, env *schedEnv) (stop func(), err error) {
	deps := controllers.Deps{API: env.api, Registry: env.reg, Logger: env.log}
	deps.Events = controllers.NewEvents(deps)
	s, err := scheduler.New(scheduler.Deps{API: env.api, Registry: env.reg, Logger: env.log, Recorder: deps.Events.For})
	if err != nil {
		deps.Events.Close()
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { controllers.Run(cctx, deps) })
	wg.Go(func() { s.Run(cctx) })
	return func() { cancel(); wg.Wait(); drainEvents(ctx, env.cs, r.log); deps.Events.Close() }, nil
}

// rolloutTimes are, per pod, when it was first seen and when it was first seen bound, from the Deployment's
// creation.
type rolloutTimes struct {
	created, bound map[string]time.Duration
}

func (t rolloutTimes) last(m map[string]time.Duration) time.Duration {
	var l time.Duration
	for _, d := range m {
		l = max(l, d)
	}
	return l
}

// rollout watches the Deployment's pods, creates it and waits until as many pods as it has replicas are bound.
// t (optional) receives the times.
func rollout(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment, timeout time.Duration, t *rolloutTimes) error {
	if t == nil {
		t = &rolloutTimes{}
	}
	t.created, t.bound = map[string]time.Duration{}, map[string]time.Duration{}
	w, err := cs.CoreV1().Pods(d.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + d.Name})
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	defer w.Stop()
	start := time.Now()
	if _, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment: %w", err)
	}
	want := int(*d.Spec.Replicas)
	deadline := time.After(timeout)
	for len(t.bound) < want {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%w: %d of %d pods created, %d bound after %s", errTimeout, len(t.created), want, len(t.bound), timeout)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the pods watch ended with %d of %d pods bound", len(t.bound), want)
			}
			t.observe(ev, time.Since(start))
		}
	}
	return nil
}

func (t rolloutTimes) observe(ev watch.Event, at time.Duration) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	if _, seen := t.created[p.Name]; !seen {
		t.created[p.Name] = at
	}
	if _, seen := t.bound[p.Name]; !seen && p.Spec.NodeName != "" {
		t.bound[p.Name] = at
	}
}
