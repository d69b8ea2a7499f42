package kubelet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

// refused says whether g admits nobody else now.
func refused(t *testing.T, g *startGate) bool {
	t.Helper()
	if g.sem.TryAcquire(1) {
		g.sem.Release(1)
		return false
	}
	return true
}

func TestStartGate(t *testing.T) {
	t.Run("limit and leaving once", func(t *testing.T) {
		g := newStartGate(2, time.Hour)
		a, err := g.enter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		b, err := g.enter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !refused(t, g) {
			t.Fatal("a third start was admitted beside two")
		}
		a()
		a() // a second call gives up nothing more
		c, err := g.enter(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !refused(t, g) {
			t.Fatal("leaving twice freed two places")
		}
		b()
		c()
		if refused(t, g) {
			t.Fatal("no place after everyone left")
		}
	})
	t.Run("a start holds its place for hold at most", func(t *testing.T) {
		g := newStartGate(1, 20*time.Millisecond)
		stuck, err := g.enter(t.Context()) // never leaves, as a runtime call that hangs
		if err != nil {
			t.Fatal(err)
		}
		next, err := g.enter(t.Context()) // admitted once the hold runs out
		if err != nil {
			t.Fatal(err)
		}
		stuck() // late: must not free next's place
		if !refused(t, g) {
			t.Fatal("the late leave freed a place it no longer held")
		}
		next()
	})
	t.Run("the waiter's context ends", func(t *testing.T) {
		g := newStartGate(1, time.Hour)
		a, _ := g.enter(t.Context())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := g.enter(ctx)
			done <- err
		}()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("enter after cancel: %v", err)
		}
		a()
		if refused(t, g) {
			t.Fatal("the cancelled waiter kept a place")
		}
	})
	t.Run("no limit", func(t *testing.T) {
		var g *startGate = newStartGate(-1, time.Hour)
		for range 100 {
			leave, err := g.enter(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer leave()
		}
	})
}

// oneSandboxAtATime is the recording fake runtime whose RunPodSandbox calls wait until the test lets each go,
// counting how many are in flight at once.
type oneSandboxAtATime struct {
	*recording
	entered chan string   // the pod's name, when a RunPodSandbox call starts
	proceed chan struct{} // one per call that may finish

	mu                sync.Mutex
	inFlight, maxSeen int
}

func (r *oneSandboxAtATime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.mu.Lock()
	r.inFlight++
	r.maxSeen = max(r.maxSeen, r.inFlight)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	r.entered <- cfg.Metadata.Name
	select {
	case <-r.proceed:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return r.recording.RunPodSandbox(ctx, cfg, handler)
}

func TestPodStartsTakeTurns(t *testing.T) {
	var rt *oneSandboxAtATime
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) {
		if rt == nil {
			rt = &oneSandboxAtATime{recording: e.rt, entered: make(chan string, 10), proceed: make(chan struct{})}
		}
		c.Runtime, c.MaxParallelStarts, c.startHold = rt, 1, time.Hour
	})
	names := []string{"a", "b", "c"}
	for _, n := range names {
		e.create(simple(n, corev1.RestartPolicyAlways))
	}
	started := map[string]bool{}
	for range names {
		name := <-rt.entered
		if started[name] {
			t.Fatalf("pod %s's sandbox was asked for twice", name)
		}
		started[name] = true
		// While this call waits, the other pods wait for their turn: they may not call the runtime yet.
		rt.proceed <- struct{}{}
		e.until("running", isRunning, name)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.maxSeen != 1 {
		t.Errorf("%d sandboxes were being created at once, want 1 (MaxParallelStarts)", rt.maxSeen)
	}
}

// A pull does not hold up other pods' starts: the pod gives its place up while its image comes.
func TestImagePullLeavesTheStartGate(t *testing.T) {
	ce := newCRIEnv(t, func(ce *criEnv, c *PodsConfig) {
		c.MaxParallelStarts, c.startHold = 1, time.Hour
	})
	ce.srv.Delay("PullImage", time.Hour) // the test ends first; its context ends the call
	ce.create(imagePod("slow", "example.test/slow:1", corev1.PullIfNotPresent))
	ce.until("pulling", func(p *corev1.Pod) bool {
		return ce.events("slow")[`Normal Pulling Pulling image "example.test/slow:1"`] > 0
	}, "slow")
	ref, _ := withDefaultTag("example.test/here:1")
	ce.srv.AddImage(ref, 1234)
	ce.create(imagePod("quick", "example.test/here:1", corev1.PullIfNotPresent))
	ce.until("running", isRunning, "quick")
	if p := ce.pod("slow"); isRunning(p) {
		t.Fatal("the slow pod runs: its pull was not delayed")
	}
}

// A pod deleted while it waits for its turn starts nothing when its turn comes.
func TestPodDeletedWhileWaitingItsTurn(t *testing.T) {
	var rt *oneSandboxAtATime
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) {
		if rt == nil {
			rt = &oneSandboxAtATime{recording: e.rt, entered: make(chan string, 10), proceed: make(chan struct{})}
		}
		c.Runtime, c.MaxParallelStarts, c.startHold = rt, 1, time.Hour
	})
	e.create(simple("first", corev1.RestartPolicyAlways))
	if name := <-rt.entered; name != "first" {
		t.Fatalf("sandbox of %s first", name)
	}
	e.create(simple("waiting", corev1.RestartPolicyAlways))
	waiting := e.pod("waiting")
	// Its worker waits for its turn (deleted before, it would tear down without ever asking).
	apitest.Eventually(t, "the second pod waits for its turn", func() bool { return e.pods.starts.waiting.Load() == 1 })
	if err := e.admin.CoreV1().Pods("default").Delete(t.Context(), "waiting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its worker has seen the deletion (while it still waits behind "first").
	apitest.Eventually(t, "the waiting pod's worker sees its deletion", func() bool {
		e.pods.mu.Lock()
		w := e.pods.workers[waiting.UID]
		e.pods.mu.Unlock()
		return w != nil && w.goneOrDeleted()
	})
	rt.proceed <- struct{}{}
	e.until("running", isRunning, "first")
	apitest.Eventually(t, "the deleted pod is gone", func() bool {
		_, err := e.admin.CoreV1().Pods("default").Get(t.Context(), "waiting", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	select {
	case name := <-rt.entered:
		t.Fatalf("RunPodSandbox for %s after the deletion", name)
	default:
	}
}
