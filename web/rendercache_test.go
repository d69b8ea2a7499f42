package web

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

func TestSharedRenders(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	rev := int64(7)
	revs := func() ([]int64, bool) { return []int64{rev}, true }
	allowed := true
	asked := kubeapi.Attributes{Cluster: "c1", Verb: "list", Resource: "pods"}
	same := func(_ context.Context, ds []decision) (bool, error) {
		for _, d := range ds {
			if d.attrs.User.Name != "" || d.attrs.Verb != asked.Verb || d.attrs.Resource != asked.Resource ||
				d.attrs.Cluster != asked.Cluster || d.allowed != allowed {
				return false, nil
			}
		}
		return true, nil
	}
	var renders atomic.Int32
	do := func(ctx context.Context) ([]byte, error) {
		renders.Add(1)
		recordDecision(ctx, kubeapi.Attributes{User: kubeapi.User{Name: "someone"}, Cluster: "c1", Verb: "list", Resource: "pods"}, allowed)
		return []byte("html"), nil
	}
	rc := newRenderCache()
	key := keyOf("list", "c1", url.Values{"resource": {"pods"}})
	get := func() string {
		t.Helper()
		b, err := rc.render(t.Context(), key, clock, revs, same, do)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := func(what string, n int32) {
		t.Helper()
		if got := renders.Load(); got != n {
			t.Fatalf("%s: %d renders, want %d", what, got, n)
		}
	}

	get()
	get()
	want("the same region twice", 1)
	rev = 8
	get()
	want("after its collection moved", 2)
	now = now.Add(renderTTL)
	get()
	want("after renderTTL (ages)", 3)
	allowed = false
	get()
	get()
	want("a user with other answers: a second variant", 4)
	allowed = true
	get()
	want("the first variant again", 4)

	// Many tabs at once: one render, the others wait for it.
	rev = 9
	release := make(chan struct{})
	blocking := func(ctx context.Context) ([]byte, error) {
		<-release
		return do(ctx)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := rc.render(t.Context(), key, clock, revs, same, blocking); err != nil {
				t.Error(err)
			}
		})
	}
	apitest.Eventually(t, "a render in flight", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.inflight[key] != nil
	})
	close(release)
	wg.Wait()
	want("50 tabs at once", 5)

	// A failed render is not shared.
	rev = 10
	boom := errors.New("boom")
	if _, err := rc.render(t.Context(), key, clock, revs, same, func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed render: %v", err)
	}
	get()
	want("after a failed render", 6)
}
