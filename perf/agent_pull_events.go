package perf

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// pullEvents follows one namespace's events through an informer and keeps, per pod, the first Pulled event of
// a pull (the agent's, as kubelet's: "Successfully pulled image ... in X (Y including waiting)") and when the
// harness saw it.
type pullEvents struct {
	stop chan struct{}

	mu     sync.Mutex // guards pulled
	pulled map[string]seenEvent
}

type seenEvent struct {
	msg  string
	seen time.Time
}

func newPullEvents(ctx context.Context, cs kubernetes.Interface, ns string) (*pullEvents, error) {
	pe := &pullEvents{stop: make(chan struct{}), pulled: map[string]seenEvent{}}
	inf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns)).Core().V1().Events().Informer()
	see := func(o any) {
		ev, ok := o.(*corev1.Event)
		if !ok || ev.Reason != "Pulled" || ev.InvolvedObject.Kind != "Pod" || !pulledMessage.MatchString(ev.Message) {
			return
		}
		pe.mu.Lock()
		defer pe.mu.Unlock()
		if _, ok := pe.pulled[ev.InvolvedObject.Name]; !ok {
			pe.pulled[ev.InvolvedObject.Name] = seenEvent{ev.Message, time.Now()}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return nil, err
	}
	go inf.Run(pe.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(pe.stop)
		return nil, fmt.Errorf("event informer of %s did not sync", ns)
	}
	return pe, nil
}

func (pe *pullEvents) Stop() { close(pe.stop) }

// waitPulled waits up to timeout for pod's Pulled event and returns its message and when it was seen.
func (pe *pullEvents) waitPulled(ctx context.Context, pod string, timeout time.Duration) (string, time.Time, error) {
	var ev seenEvent
	err := waitFor(ctx, timeout, "the Pulled event of "+pod, func() bool {
		pe.mu.Lock()
		defer pe.mu.Unlock()
		var ok bool
		ev, ok = pe.pulled[pod]
		return ok
	})
	return ev.msg, ev.seen, err
}

// pulledMessage is the Pulled event of a pull, as kubelet (pkg/kubelet/images) and the agent word it; the image
// size is left out when the runtime does not know it.
var pulledMessage = regexp.MustCompile(`^Successfully pulled image "(?:[^"\\]|\\.)*" in (\S+) \((\S+) including waiting\)\.(?: Image size: (\d+) bytes\.)?$`)

// parsePulled reads the pull's duration, its duration with the wait for a pull slot, and the image's size (0:
// not given) from a Pulled event's message.
func parsePulled(msg string) (took, total time.Duration, size int64, err error) {
	m := pulledMessage.FindStringSubmatch(msg)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("not the Pulled event of a pull: %q", msg)
	}
	if took, err = time.ParseDuration(m[1]); err != nil {
		return 0, 0, 0, fmt.Errorf("the Pulled event %q: %w", msg, err)
	}
	if total, err = time.ParseDuration(m[2]); err != nil {
		return 0, 0, 0, fmt.Errorf("the Pulled event %q: %w", msg, err)
	}
	if m[3] != "" {
		if size, err = strconv.ParseInt(m[3], 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("the Pulled event %q: %w", msg, err)
		}
	}
	return took, total, size, nil
}

// criPull is one CRI PullImage in containerd's log: how long it took and when it answered.
type criPull struct {
	took time.Duration
	end  time.Time
}

// containerd 1.6's CRI plugin logs PullImage at info level when it is called and when it returns
// (pkg/cri/server/instrumented_service.go), with the image as the caller named it.
var (
	pullImageBegin = regexp.MustCompile(`^PullImage "((?:[^"\\]|\\.)*)"$`)
	pullImageEnd   = regexp.MustCompile(`^PullImage "((?:[^"\\]|\\.)*)" returns image reference "[^"]*"$`)
)

// pullImageCalls reads containerd's log at path and returns, per image, the last PullImage that began and
// returned between from and to. Unreadable lines are skipped; nil if the log cannot be read.
func pullImageCalls(path string, from, to time.Time) map[string]criPull {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	began, out := map[string]time.Time{}, map[string]criPull{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at, msg, ok := logfmtLine(sc.Text())
		if !ok || at.Before(from) || at.After(to) {
			continue
		}
		if m := pullImageEnd.FindStringSubmatch(msg); m != nil {
			if t0, ok := began[m[1]]; ok {
				out[m[1]] = criPull{took: at.Sub(t0), end: at}
				delete(began, m[1])
			}
		} else if m := pullImageBegin.FindStringSubmatch(msg); m != nil {
			began[m[1]] = at
		}
	}
	return out
}
