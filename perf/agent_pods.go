package perf

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podTimer follows one namespace's pods through an informer and notes when each was first seen, bound,
// Running (every container started) and deleted.
type podTimer struct {
	stop chan struct{}
	inf  cache.SharedIndexInformer

	mu                    sync.Mutex // guards the maps and deleted
	added, bound, running map[string]time.Time
	deleted, live         int
}

// timedNamespace creates namespace ns and a podTimer on it: how every pod scenario starts (the caller stops the
// timer).
func timedNamespace(ctx context.Context, cs kubernetes.Interface, ns string) (*podTimer, error) {
	if err := createNamespace(ctx, cs, ns, time.Minute); err != nil {
		return nil, err
	}
	return newPodTimer(ctx, cs, ns)
}

func newPodTimer(ctx context.Context, cs kubernetes.Interface, ns string) (*podTimer, error) {
	pt := &podTimer{stop: make(chan struct{}), added: map[string]time.Time{}, bound: map[string]time.Time{},
		running: map[string]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { pt.see(o.(*corev1.Pod), true) },
		UpdateFunc: func(_, o any) { pt.see(o.(*corev1.Pod), false) },
		DeleteFunc: func(any) {
			pt.mu.Lock()
			pt.deleted++
			pt.live--
			pt.mu.Unlock()
		},
	})
	if err != nil {
		return nil, err
	}
	pt.inf = inf
	go inf.Run(pt.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(pt.stop)
		return nil, fmt.Errorf("pod informer of %s did not sync", ns)
	}
	return pt, nil
}

func (pt *podTimer) Stop() { close(pt.stop) }

// notRunning describes up to n pods not seen Running yet, oldest first: where they are and what their status
// says (for the progress log, which otherwise shows only counts when a few pods lag behind).
func (pt *podTimer) notRunning(n int) []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var lag []*corev1.Pod
	for _, o := range pt.inf.GetStore().List() {
		if p := o.(*corev1.Pod); pt.running[p.Name].IsZero() {
			lag = append(lag, p)
		}
	}
	sort.Slice(lag, func(i, j int) bool { return pt.added[lag[i].Name].Before(pt.added[lag[j].Name]) })
	var out []string
	for _, p := range lag[:min(n, len(lag))] {
		why := string(p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				why += fmt.Sprintf(" %s=%s(%s)", c.Type, c.Status, c.Reason)
			}
		}
		if p.DeletionTimestamp != nil {
			why += " deleting"
		}
		out = append(out, fmt.Sprintf("%s on %q for %s: %s", p.Name, p.Spec.NodeName,
			time.Since(pt.added[p.Name]).Round(time.Second), why))
	}
	return out
}

func (pt *podTimer) see(p *corev1.Pod, add bool) {
	now := time.Now()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if add {
		pt.live++
	}
	if _, ok := pt.added[p.Name]; !ok {
		pt.added[p.Name] = now
	}
	if _, ok := pt.bound[p.Name]; !ok && p.Spec.NodeName != "" {
		pt.bound[p.Name] = now
	}
	if _, ok := pt.running[p.Name]; !ok && podRunning(p) {
		pt.running[p.Name] = now
	}
}

// podRunning: phase Running and every container started.
func podRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

func (pt *podTimer) counts() (running, live, deleted int) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return len(pt.running), pt.live, pt.deleted
}

// waitFor polls cond every 50 ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// latencies returns from[name] → to[name] for every name in to (from defaults to start when given).
func latencies(from map[string]time.Time, to map[string]time.Time) []time.Duration {
	var out []time.Duration
	for name, t := range to {
		if f, ok := from[name]; ok {
			out = append(out, t.Sub(f))
		}
	}
	return out
}

// createNamespace creates ns and waits for its default ServiceAccount (pods are refused before it exists).
func createNamespace(ctx context.Context, cs kubernetes.Interface, ns string, timeout time.Duration) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return waitFor(ctx, timeout, "the default ServiceAccount of "+ns, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
}

// sleepPodSpec is the measured pods' spec: one container running a small long-lived command. The image is only
// recorded by the process runtime (and the fake one).
func sleepPodSpec(node string) corev1.PodSpec {
	grace := int64(5)
	return corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{
		Name: "sleep", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}}
}

func sleepPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "agentperf"}}, Spec: sleepPodSpec(node)}
}

func sleepDeployment(name string, replicas int) *appsv1.Deployment {
	n := int32(replicas)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: sleepPodSpec("")}}}
}

// createAtRate creates n pods from mk at rate per second (open loop: each create starts on schedule, however
// long the earlier ones take) and returns when each create call started.
func createAtRate(ctx context.Context, cs kubernetes.Interface, ns string, n, rate int, mk func(i int) *corev1.Pod) (map[string]time.Time, []error) {
	var mu sync.Mutex
	starts := map[string]time.Time{}
	var errs []error
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Second / time.Duration(rate))
		select {
		case <-ctx.Done():
			wg.Wait()
			return starts, append(errs, ctx.Err())
		case <-time.After(time.Until(at)):
		}
		p := mk(i)
		wg.Go(func() {
			start := time.Now()
			_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			starts[p.Name] = start
		})
	}
	wg.Wait()
	return starts, errs
}
