package perf

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// dashScheduler is the schedulerName of every pod the harness creates: no scheduler has that profile, so the
// pods stay Pending without the server's scheduler trying them, reporting FailedScheduling events and writing
// their PodScheduled condition. Only the dashboard's own work is measured.
const dashScheduler = "dashperf-unscheduled"

// labelGroups is how many app=web-<i> label values the pods are spread over: a selector on one matches a tenth.
const labelGroups = 10

// dashPod is apiperf's realistic pod (one container with ports, env, requests and limits, four labels), with
// app=web-<i mod 10> and the unscheduled schedulerName.
func dashPod(name string, i int) *corev1.Pod {
	p := perfPod(name)
	p.Labels["app"] = fmt.Sprintf("web-%d", i%labelGroups)
	p.Spec.SchedulerName = dashScheduler
	return p
}

// loadPods creates pods <prefix><i> (i zero-padded to six digits) for i < n in ns, workers calls at a time.
// A pod that exists already counts as created (a retried load).
func loadPods(ctx context.Context, cs kubernetes.Interface, ns, prefix string, n, workers int) error {
	return parallel(ctx, workers, n, func(ctx context.Context, i int) error {
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		_, err := cs.CoreV1().Pods(ns).Create(cctx, dashPod(fmt.Sprintf("%s%06d", prefix, i), i), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// createPod creates one pod with a deadline of its own.
func createPod(ctx context.Context, cs kubernetes.Interface, ns string, p *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	return err
}

// deletePod deletes one pod at once (it is bound to no node, so nothing waits for a kubelet).
func deletePod(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// namespaceWithPods creates ns (waiting for its default ServiceAccount) and n pods named pod-NNNNNN in it.
func namespaceWithPods(ctx context.Context, cs kubernetes.Interface, ns string, n, workers int, timeout time.Duration) error {
	if err := createNamespace(ctx, cs, ns, timeout); err != nil {
		return err
	}
	if err := loadPods(ctx, cs, ns, "pod-", n, workers); err != nil {
		return fmt.Errorf("create %d pods in %s: %w", n, ns, err)
	}
	return nil
}
