package kubeapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// next waits for the next watch event (bounded by a deadline, not a sleep).
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return watch.Event{}
}

func TestWatchSelectorTransitions(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		env := newTestEnv(t, path)
		cs := env.client(t, "c1")
		ctx := t.Context()
		cms := cs.CoreV1().ConfigMaps("default")
		w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "app=web", ResourceVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Labels = map[string]string{"app": "web"} // enters the selector
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"x": "1"}
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm.Labels = nil // leaves it
		if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
			if ev := next(t, w); ev.Type != want {
				t.Fatalf("event %s, want %s", ev.Type, want)
			}
		}
	})
}

func TestWatchResumeAndOrder(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		env := newTestEnv(t, path)
		cs := env.client(t, "c1")
		ctx := t.Context()
		cms := cs.CoreV1().ConfigMaps("default")
		first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < 5; i++ {
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// From the first object's revision: the next four, in order, exactly once.
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for i := 1; i < 5; i++ {
			ev := next(t, w)
			if got := ev.Object.(*corev1.ConfigMap).Name; ev.Type != watch.Added || got != fmt.Sprintf("cm-%d", i) {
				t.Fatalf("event %d = %s %s", i, ev.Type, got)
			}
		}
	})
}

func TestWatchCompacted(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		env := newTestEnv(t, path)
		cs := env.client(t, "c1")
		ctx := t.Context()
		cms := cs.CoreV1().ConfigMaps("default")
		for i := range 3 {
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		rev, err := env.store.CurrentRevision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.store.Compact(ctx, rev); err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "2"})
		if err == nil {
			ev := next(t, w)
			w.Stop()
			if st, ok := ev.Object.(*metav1.Status); !ok || ev.Type != watch.Error || st.Code != 410 {
				t.Fatalf("watch from a compacted revision: %v %#v, want ERROR 410", ev.Type, ev.Object)
			}
		} else if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("watch from a compacted revision: %v, want 410", err)
		}
		if _, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: "2", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("exact list at a compacted revision: %v, want 410", err)
		}
	})
}

func TestInformerSyncsAndSeesEvents(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		env := newTestEnv(t, path)
		cs := env.client(t, "c1")
		ctx, cancel := context.WithCancel(t.Context())
		factory := informers.NewSharedInformerFactory(cs, 0)
		inf := factory.Core().V1().ConfigMaps().Informer()
		seen := make(chan string, 16)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			seen <- obj.(*corev1.ConfigMap).Name
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		defer cancel() // runs before Shutdown, which waits for the informers to stop
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		deadline := time.After(10 * time.Second)
		for !got["before"] || !got["after"] {
			select {
			case n := <-seen:
				got[n] = true
			case <-deadline:
				t.Fatalf("informer saw %v, want before and after", got)
			}
		}
	})
}
