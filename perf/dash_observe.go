package perf

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Observers of the churn window besides the tabs.

// rssSampler samples a process's RSS every second until stop.
type rssSampler struct {
	stopc   chan struct{}
	done    chan struct{}
	samples []float64
}

func newRSSSampler(pid int) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				if n, err := rssBytes(pid); err == nil {
					s.samples = append(s.samples, float64(n))
				}
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the median and the largest sample.
func (s *rssSampler) stop() (int64, int64) {
	close(s.stopc)
	<-s.done
	return int64(median(s.samples)), int64(percentile(s.samples, 100))
}

// watchLag is one API watch on the churn namespace during the window: the time from each churn pod's create
// start to its ADDED event, which the API serves from the same watch cache the dashboard renders from. It tells
// a cache that fell behind from renders that did.
type watchLag struct {
	cancel context.CancelFunc
	done   chan struct{}
	lat    []time.Duration // owned by the watch goroutine until done
}

func startWatchLag(ctx context.Context, cs kubernetes.Interface, ns string, log *churnLog) (*watchLag, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch the pods of %s: %w", ns, err)
	}
	wl := &watchLag{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(wl.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			now := time.Now()
			p, ok := ev.Object.(*corev1.Pod)
			if ev.Type != watch.Added || !ok {
				continue
			}
			if i, ok := log.index([]byte(p.Name)); ok {
				if start := log.start(i); start > 0 {
					wl.lat = append(wl.lat, time.Duration(now.UnixNano()-start))
				}
			}
		}
	}()
	return wl, nil
}

// stop ends the watch and returns its latencies.
func (wl *watchLag) stop() []time.Duration {
	wl.cancel()
	<-wl.done
	return wl.lat
}
